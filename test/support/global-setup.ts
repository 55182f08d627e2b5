// Runs once per test run. Integration tests start their own private dockerd per
// file (test/support/dockerd.ts); nothing global is needed yet beyond making
// sure a stray SANDGATE_HOME of the developer is never used by tests.
export default function setup(): void {
  delete process.env.SANDGATE_HOME;
  delete process.env.SANDGATE_URL;
  delete process.env.SANDGATE_TOKEN;
}
