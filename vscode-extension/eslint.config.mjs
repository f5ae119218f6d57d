// ESLint (flat config) with typescript-eslint's type-aware rules: `npm run lint` (CI runs it).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "out/**", "node_modules/**", "*.vsix"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: ["eslint.config.mjs", "scripts/*.mjs"],
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // a promise nobody awaits must say so (`void`): VS Code swallows its rejection otherwise
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      eqeqeq: ["error", "always"],
      curly: "error",
    },
  },
  {
    // the webview script runs in a browser: its own tsconfig (DOM, bundler resolution)
    files: ["src/roofline/webview.ts"],
    languageOptions: { parserOptions: { projectService: false, project: "./tsconfig.webview.json" } },
  },
  {
    // node:test runs every top-level test() itself and reports a rejection as a failure
    files: ["test/**/*.ts"],
    rules: { "@typescript-eslint/no-floating-promises": "off" },
  },
  {
    files: ["**/*.mjs"],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: { process: "readonly", console: "readonly" } },
  },
);
