// gateHello: may a blind https tunnel to `host` open with these first bytes? On node's own
// ClientHellos and hand-made ones, every case of name/IP host against SNI present/absent/other.
import { describe, expect, it } from "vitest";
import { MAX_HELLO_BYTES } from "../../../src/supervisor/tls/client-hello.js";
import { gateHello, NOT_TLS, TLS_SNI_MISMATCH, TLS_SNI_MISSING } from "../../../src/supervisor/tls/hello-gate.js";
import { capture, handmade, sni } from "../../support/client-hellos.js";

describe("gateHello", () => {
  it("passes a ClientHello whose SNI is the CONNECT host, case and a trailing dot aside", async () => {
    const hello = await capture({ servername: "API.Example.test" });
    expect(gateHello(hello, "api.example.test")).toEqual({ kind: "pass" });
    expect(gateHello(hello, "API.EXAMPLE.TEST.")).toEqual({ kind: "pass" });
    expect(gateHello(handmade([sni("api.example.test.")]), "api.example.test")).toEqual({ kind: "pass" });
  });

  it("refuses another name (tls_sni_mismatch) and no name for a name host (tls_sni_missing)", async () => {
    expect(gateHello(await capture({ servername: "evil.test" }), "api.example.test")).toEqual({
      kind: "refuse",
      reason: TLS_SNI_MISMATCH,
      detail: "the ClientHello is for evil.test, the tunnel for api.example.test",
    });
    // A suffix or a subdomain is another name.
    expect(gateHello(handmade([sni("x.api.example.test")]), "api.example.test")).toMatchObject({ reason: TLS_SNI_MISMATCH });
    expect(gateHello(handmade([sni("example.test")]), "api.example.test")).toMatchObject({ reason: TLS_SNI_MISMATCH });
    expect(gateHello(handmade([]), "api.example.test")).toMatchObject({ kind: "refuse", reason: TLS_SNI_MISSING });
  });

  it("an IP literal host: no SNI passes (node sends none to an IP); a name is refused; the IP itself passes", async () => {
    const toIp = await capture({});
    expect(gateHello(toIp, "127.0.0.1")).toEqual({ kind: "pass" });
    expect(gateHello(handmade([]), "2001:db8::1")).toEqual({ kind: "pass" });
    expect(gateHello(await capture({ servername: "fronted.example.test" }), "127.0.0.1")).toMatchObject({ kind: "refuse", reason: TLS_SNI_MISMATCH });
    expect(gateHello(handmade([sni("192.0.2.1")]), "192.0.2.1")).toEqual({ kind: "pass" });
    expect(gateHello(handmade([sni("192.0.2.2")]), "192.0.2.1")).toMatchObject({ reason: TLS_SNI_MISMATCH });
  });

  it("anything that is not a ClientHello is not_tls, with why; a prefix is incomplete", async () => {
    expect(gateHello(Buffer.from("GET / HTTP/1.1\r\n\r\n"), "a.test")).toEqual({ kind: "refuse", reason: NOT_TLS, detail: "the first byte is not a TLS handshake record" });
    expect(gateHello(Buffer.from("SSH-2.0-OpenSSH_9.6\r\n"), "a.test")).toMatchObject({ reason: NOT_TLS });
    expect(gateHello(Buffer.from([0x16, 0x03, 0x03, 0x00, 0x10, 0x02]), "a.test")).toMatchObject({ reason: NOT_TLS, detail: "the first handshake message is not a ClientHello" });
    const hello = await capture({ servername: "a.test" });
    expect(gateHello(hello.subarray(0, hello.length - 1), "a.test")).toEqual({ kind: "incomplete" });
    expect(gateHello(Buffer.alloc(0), "a.test")).toEqual({ kind: "incomplete" });
  });

  it("bytes after the ClientHello (early data, the next record) do not change the verdict", async () => {
    const hello = await capture({ servername: "a.test" });
    expect(gateHello(Buffer.concat([hello, Buffer.from("more")]), "a.test")).toEqual({ kind: "pass" });
  });

  it("decides by MAX_HELLO_BYTES: a record header promising the largest record, then junk", () => {
    const header = Buffer.from([0x16, 0x03, 0x01, 0x40, 0x00, 0x01]);
    const filled = Buffer.concat([header, Buffer.alloc(MAX_HELLO_BYTES - header.length)]);
    expect(gateHello(filled.subarray(0, MAX_HELLO_BYTES - 1), "a.test")).toEqual({ kind: "incomplete" });
    expect(gateHello(filled, "a.test")).toMatchObject({ kind: "refuse", reason: NOT_TLS });
  });
});
