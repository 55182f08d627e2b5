#!/usr/bin/env -S node --
// Entry point of the `sandgate` command.
import { main } from "./program.js";

const code = await main(process.argv);
// A failed command exits now: nothing it left open (a socket, a retry timer) keeps
// the user waiting. Output to pipes, files and terminals is written synchronously on Linux.
if (code !== 0) process.exit(code);
process.exitCode = code;
