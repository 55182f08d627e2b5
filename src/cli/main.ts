#!/usr/bin/env node
// Entry point of the `sandgate` command.
import { main } from "./program.js";

process.exitCode = await main(process.argv);
