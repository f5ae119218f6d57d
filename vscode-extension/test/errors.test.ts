import assert from "node:assert/strict";
import { test } from "node:test";
import { errorMessage } from "../src/errors";

test("anything thrown becomes one readable line", () => {
  assert.equal(errorMessage(new Error("boom")), "boom");
  assert.equal(errorMessage("plain"), "plain");
  assert.equal(errorMessage({ code: -32603, message: "internal error" }), "internal error"); // a JSON-RPC error
  assert.equal(errorMessage({ code: 1 }), '{"code":1}');
  assert.equal(errorMessage(undefined), "undefined");
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.equal(errorMessage(cyclic), "unknown error");
});
