// eslint (flat config) for the widgets' front ends and their Node tests: `make test-js` runs
// `npx eslint` over src/circuitbook/widgets/*.js and tests/js/. The widgets are ES modules
// that run in a browser page (anywidget); the tests run in Node.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["src/circuitbook/widgets/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.browser },
  },
  {
    files: ["tests/js/**/*.js", "tests/js/**/*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.node },
  },
  {
    rules: {
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_", caughtErrors: "none" }],
      eqeqeq: ["error", "always"],
      "prefer-const": "error",
      "no-var": "error",
    },
  },
];
