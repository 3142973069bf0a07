// ESLint's configuration for the in-page scripts (tools/sdk.py lint runs it on each script as it ships:
// the SDK joined from src/sdk/reticle/*.js, then each other src/sdk/*.js).  Classic browser scripts,
// not modules, with the browser's globals, and these rules only: code that is never used, names that
// are never defined, code that can never run, a few more mistakes that ESLint's recommended set also
// calls errors, no function over 80 lines (IIFEs count too; the one wrapper that holds the whole
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
}, {
  // The SDK calls only the built-ins its config section captured before any page script ran (N.push(list, x),
  // not list.push(x)): a method looked up on a prototype at call time is one a page may have patched.  The
  // location object's methods are unforgeable (no page can replace them) and stay as they are.
  files: ["reticle-sdk.js"],
  rules: {
    "no-restricted-syntax": ["error", {
      selector: "CallExpression[callee.type='MemberExpression'][callee.computed=false]" +
        "[callee.property.name=/^(add|addEventListener|addRange|apply|assignedElements|bind|blur|call|cancel|catch|charAt|charCodeAt|click|clone|close|closest|collapse|concat|contains|createRange|decode|delete|deref|disconnect|dispatchEvent|elementFromPoint|endsWith|entries|every|exec|execCommand|fill|filter|find|findIndex|flat|focus|forEach|get|getAllResponseHeaders|getAttribute|getBoundingClientRect|getComputedStyle|getElementById|getEntries|getEntriesByType|getItem|getRandomValues|getReader|getResponseHeader|getRootNode|getSelection|getTime|has|hasAttribute|hasFocus|includes|indexOf|join|key|keys|lastIndexOf|map|match|matches|namedItem|next|normalize|observe|padStart|pop|push|querySelector|querySelectorAll|randomUUID|read|reduce|removeAllRanges|removeEventListener|repeat|replace|replaceState|requestSubmit|reverse|scrollIntoView|search|selectNodeContents|send|set|setData|setItem|setRequestHeader|setSelectionRange|shift|slice|some|sort|splice|split|startsWith|submit|substr|substring|takeRecords|test|text|then|toFixed|toISOString|toLowerCase|toString|toUpperCase|trim|unshift|values)$/]" +
        ":not([callee.object.name='N']):not([callee.object.name='location'])",
      message: "call the built-in the SDK captured (N.name(receiver, ...args)): a page may have patched this one",
    }, {
      selector: "CallExpression[callee.type='MemberExpression'][callee.object.type='Identifier']" +
        "[callee.object.name=/^(Object|Math|JSON|Array|Reflect|Date|Promise|Number|String|ArrayBuffer|crypto)$/]",
      message: "call the built-in the SDK captured (N.name(...)): a page may have replaced this one",
    }],
  },
}];
