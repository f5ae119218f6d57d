// Builds perflsp's wheel into python/ for the .vsix: perflsp is not on PyPI, so a machine whose
// Python lacks it installs it from the extension's own copy ("Install in Terminal" runs
// `<python> -m pip install <extension>/python/perflsp-*.whl`). Fails the package step when the
// wheel cannot be built: a .vsix must not offer an install it cannot do.
//   PYTHON   the Python that builds it (default python3); needs pip, and hatchling from PyPI
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";

fs.rmSync("python", { recursive: true, force: true });
execFileSync(process.env.PYTHON ?? "python3",
  ["-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check", "--wheel-dir", "python", ".."],
  { stdio: "inherit" });
const wheels = fs.readdirSync("python").filter((name) => /^perflsp-.*\.whl$/.test(name));
if (wheels.length !== 1) {
  throw new Error(`expected one perflsp wheel in python/, found: ${wheels.join(", ") || "none"}`);
}
console.log(`bundled python/${wheels[0]}`);
