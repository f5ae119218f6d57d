// Bundles the extension (Node, CommonJS) and the roofline webview script (browser, IIFE).
import * as fs from "node:fs";
import * as esbuild from "esbuild";

const production = process.argv.includes("--production");
const watch = process.argv.includes("--watch");
const common = { bundle: true, minify: production, sourcemap: !production, logLevel: "info" };
const builds = [
  { ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node", format: "cjs", external: ["vscode"], target: "node20" },
  { ...common, entryPoints: ["src/roofline/webview.ts"], outfile: "dist/roofline.js", platform: "browser", format: "iife", target: "es2022" },
];
if (production) {
  fs.rmSync("dist", { recursive: true, force: true });
}
if (watch) {
  for (const options of builds) {
    await (await esbuild.context(options)).watch();
  }
} else {
  await Promise.all(builds.map((options) => esbuild.build(options)));
}
