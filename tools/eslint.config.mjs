// ESLint's configuration for the in-page scripts (tools/sdk.py lint runs it on each script as it ships:
// the SDK joined from src/sdk/reticle/*.js, then each other src/sdk/*.js).  Classic browser scripts,
// not modules, with the browser's globals, and these rules only: code that is never used, names that
// are never defined, code that can never run, a few more mistakes that ESLint's recommended set also
// calls errors, and no function over 80 lines (IIFEs count too; the one wrapper that holds the whole
// SDK is exempt by an eslint-disable-next-line comment above it).
import globals from "globals";

export default [{
  files: ["**/*.js"],
  languageOptions: {ecmaVersion: 2022, sourceType: "script", globals: {...globals.browser}},
  linterOptions: {reportUnusedDisableDirectives: "error"},
  rules: {
    "no-unused-vars": ["error", {args: "none", caughtErrors: "none"}],
    "no-undef": "error",
    "no-unreachable": "error",
    "no-dupe-keys": "error",
    "no-duplicate-case": "error",
    "no-redeclare": "error",
    "no-self-assign": "error",
    "no-unsafe-finally": "error",
    "no-constant-binary-expression": "error",
    "no-func-assign": "error",
    "use-isnan": "error",
    "valid-typeof": "error",
    "max-lines-per-function": ["error", {max: 80, skipBlankLines: true, skipComments: true, IIFEs: true}],
  },
}];
