/*! reticle-sdk __RETICLE_VERSION__ */
/* Reticle in-page SDK. Served by the Reticle daemon at /reticle.js; dev-only, loopback-only by default.
   One IIFE; the only global it creates is window.reticle. It never throws into the host page.
   Named sections, in a fixed order: grep -n '// == Section' lists them (tests/test_sdk_js.py holds the order). */
/* eslint-disable-next-line max-lines-per-function -- this IIFE is the whole SDK; its functions are held to 80 */
(function () {
  'use strict';
  // == Section: config == configuration, caps, and the natives captured before any page script runs
  // provides: CONFIG, SCRIPT_EL, CFG, VERSION, PROTOCOL_VERSION, MAX_FRAME, BATCH_MAX_EVENTS,
  //   BATCH_MAX_BYTES, QUEUE_MAX, OPEN_QUEUE_MAX, BUFFERED_MAX, RESULT_QUEUE_MAX, BODY_CAP, BODY_SCAN,
  //   FRAME_DATA_CAP, STACK_CAP, ERROR_CAP, REDACTED, PREFIX, N, NAT, uncurry, captureFunctions, eitherOf,
  //   captureRegExp, rxMatches, rxAdvance, rxExpand, rxReplace, rxSplit, HELD_PLATFORM, HELD_NAMES,
  //   captureHeld, descOf, heldMethod, invoke, byName, restOf, TO_JSON, ownJson, stringify
  // uses: S (04)
  /* eslint-disable no-restricted-syntax -- this section makes the captures, before any page script runs */
  var CONFIG = /*__RETICLE_CONFIG__*/null;
  if (typeof window === 'undefined' || typeof document === 'undefined') return;
  if (window.reticle && window.reticle.__reticleSdk) return; // loaded twice: keep the first copy

  var SCRIPT_EL = document.currentScript || null;
  var CFG = CONFIG && typeof CONFIG === 'object' ? CONFIG : {};
  var VERSION = String(CFG.version || '0.0.0');
  var PROTOCOL_VERSION = CFG.protocolVersion || 1;
  var MAX_FRAME = Math.max(65536, Number(CFG.maxMessageBytes) || 1048576);
  var BATCH_MAX_EVENTS = 200;
  var BATCH_MAX_BYTES = Math.min(524288, Math.floor(MAX_FRAME / 2));
  var QUEUE_MAX = 500;
  var OPEN_QUEUE_MAX = 20000; // events held while the socket is open but backed up
  var BUFFERED_MAX = 4 << 20; // bytes the browser may buffer on the socket before we hold back
  var RESULT_QUEUE_MAX = 100;
  var BODY_CAP = 8192;
  var BODY_SCAN = 16384;
  var FRAME_DATA_CAP = 4096;
  var STACK_CAP = 4000;
  var ERROR_CAP = 4096;
  var REDACTED = '[redacted]';
  var PREFIX = '[reticle]';

  // ---- native handles, captured before anything is patched ----------------------------------
  var N = {};
  (function () {
    var w = window;
    N.setTimeout = w.setTimeout.bind(w);
    N.clearTimeout = w.clearTimeout.bind(w);
    N.setInterval = w.setInterval.bind(w);
    N.clearInterval = w.clearInterval.bind(w);
    N.raf = w.requestAnimationFrame
      ? w.requestAnimationFrame.bind(w)
      : function (f) {
          return N.setTimeout(f, 16);
        };
    N.now =
      w.performance && w.performance.now
        ? w.performance.now.bind(w.performance)
        : function () {
            return Date.now();
          };
    N.dateNow = Date.now;
    N.warn = w.console && w.console.warn ? w.console.warn.bind(w.console) : function () {};
    N.WebSocket = w.WebSocket;
    N.fetch = w.fetch;
    N.stringify = JSON.stringify;
    N.parse = JSON.parse;
    N.MutationObserver = w.MutationObserver;
    N.Promise = w.Promise;
  })();


  // ---- every built-in the SDK calls, captured before any page script can patch it ---------------
  // The SDK calls what it captured here, never a method it looks up on a prototype at call time: a page
  // that patches String.prototype.replace, Array.prototype.push, RegExp.prototype.exec, Function.prototype
  // .call, EventTarget.prototype.addEventListener or Element.prototype.getAttribute after the SDK started
  // (a device starts it before any page script) changes nothing the SDK computes, sends or fetches.
  // N.push(list, x) stands for list.push(x), and so on (tools/eslint.config.mjs refuses the other spelling).
  var NAT = {
    apply: Reflect.apply,
    gpo: Object.getPrototypeOf,
    gopd: Object.getOwnPropertyDescriptor,
    names: Object.getOwnPropertyNames,
    create: Object.create,
    // uncurry(String.prototype.trim)(s) is s.trim(), through a bound `call`: no lookup at call time
    bindCall: Function.prototype.bind.bind(Function.prototype.call),
    RegExp: RegExp,
    Map: Map,
    WeakMap: WeakMap,
    Promise: Promise,
    stringify: JSON.stringify
  };
  function uncurry(fn) {
    return NAT.bindCall(fn);
  }
  function captureFunctions() {
    var O = Object,
      M = Math,
      A = Array.prototype,
      S = String.prototype;
    N.apply = NAT.apply;
    N.call = uncurry(Function.prototype.call);
    N.bind = uncurry(Function.prototype.bind);
    N.hasOwn = uncurry(O.prototype.hasOwnProperty);
    N.fnToString = uncurry(Function.prototype.toString);
    var statics = { keys: O.keys, defineProperty: O.defineProperty, getOwnPropertyDescriptor: NAT.gopd,
      getPrototypeOf: NAT.gpo, assign: O.assign, is: O.is, freeze: O.freeze, isArray: Array.isArray,
      arrayFrom: Array.from, round: M.round, max: M.max, min: M.min, floor: M.floor, ceil: M.ceil, abs: M.abs,
      random: M.random, Map: Map, Set: Set, WeakMap: WeakMap, WeakSet: WeakSet, RegExp: RegExp, URL: window.URL,
      Document: window.Document, HTMLFormElement: window.HTMLFormElement };
    for (var k in statics) if (NAT.apply(O.prototype.hasOwnProperty, statics, [k])) N[k] = statics[k];
    N.dateISO = uncurry(Date.prototype.toISOString);
    N.dateTime = uncurry(Date.prototype.getTime);
    // arrays (generic: they take array-likes such as a NodeList or arguments as well), then strings
    var names = ['push', 'join', 'map', 'filter', 'some', 'every', 'reduce', 'shift', 'pop', 'splice', 'unshift',
      'sort'];
    for (var i = 0; i < names.length; i++) N[names[i]] = uncurry(A[names[i]]);
    names = ['toLowerCase', 'toUpperCase', 'trim', 'charAt', 'charCodeAt', 'normalize'];
    for (i = 0; i < names.length; i++) N[names[i]] = uncurry(S[names[i]]);
    // a string's or an array's, as the receiver is
    names = ['slice', 'indexOf', 'lastIndexOf', 'concat'];
    for (i = 0; i < names.length; i++) N[names[i]] = eitherOf(S[names[i]], A[names[i]]);
    NAT.sSlice = uncurry(S.slice);
    NAT.sIndexOf = uncurry(S.indexOf);
    NAT.aSlice = uncurry(A.slice);
    // Promise's own functions, ArrayBuffer.isView
    var P = NAT.Promise;
    N.resolve = function (v) {
      return NAT.apply(P.resolve, P, [v]);
    };
    N.reject = function (e) {
      return NAT.apply(P.reject, P, [e]);
    };
    N.all = function (list) {
      return NAT.apply(P.all, P, [list]);
    };
    var isView = ArrayBuffer.isView;
    N.isView = function (v) {
      return NAT.apply(isView, ArrayBuffer, [v]);
    };
  }
  // the arguments are passed on as given: concat(a, undefined) is not concat(a)
  function eitherOf(forString, forArray) {
    return function (x) {
      return NAT.apply(typeof x === 'string' ? forString : forArray, x, restOf(arguments, 1));
    };
  }

  // Regular expressions, matched by the captured exec alone.  The built-in test, replace, split and search
  // look up `exec`, `flags` and Symbol.replace/split/search on the pattern (or on String.prototype, for a
  // string pattern) at call time: a page could answer in their place.
  function captureRegExp() {
    var R = RegExp.prototype;
    NAT.exec = uncurry(R.exec);
    NAT.source = uncurry(NAT.gopd(R, 'source').get);
    NAT.flags = uncurry(NAT.gopd(R, 'flags').get);
    NAT.wmGet = uncurry(WeakMap.prototype.get);
    NAT.wmSet = uncurry(WeakMap.prototype.set);
    NAT.globals = new NAT.WeakMap();
    NAT.anywhere = new NAT.WeakMap();
    // a text spec the SDK made has a test of its own
    N.exec = function (re, s) {
      return re instanceof NAT.RegExp ? NAT.exec(re, s) : re.exec(s);
    };
    N.test = function (re, s) {
      return re instanceof NAT.RegExp ? NAT.exec(re, s) !== null : re.test(s);
    };
    N.replace = rxReplace;
    N.split = rxSplit;
    N.search = function (s, re) {
      var m = NAT.exec(new NAT.RegExp(NAT.source(re), NAT.flags(re)), String(s));
      return m === null ? -1 : m.index;
    };
  }
  // the matches of re in s: all of them, or the first; for split, anywhere (split ignores the y flag)
  function rxMatches(re, s, all, anywhere) {
    var kept = anywhere ? NAT.anywhere : NAT.globals,
      g = NAT.wmGet(kept, re);
    if (!g) {
      var flags = NAT.flags(re);
      if (anywhere) flags = rxReplace(flags, 'y', '');
      g = new NAT.RegExp(NAT.source(re), NAT.sIndexOf(flags, 'g') === -1 ? flags + 'g' : flags);
      NAT.wmSet(kept, re, g);
    }
    var out = [],
      wide = NAT.sIndexOf(NAT.flags(g), 'u') !== -1 || NAT.sIndexOf(NAT.flags(g), 'v') !== -1,
      m;
    g.lastIndex = 0;
    while ((m = NAT.exec(g, s)) !== null) {
      var end = m.index + m[0].length;
      out[out.length] = m;
      if (!all) break;
      g.lastIndex = end === m.index ? rxAdvance(s, end, wide) : end;
    }
    return out;
  }
  // past an empty match: one code unit, or with the u flag one code point (a surrogate pair is one)
  function rxAdvance(s, at, wide) {
    var c = N.charCodeAt(s, at);
    return wide && c >= 0xd800 && c <= 0xdbff && at + 1 < s.length && N.charCodeAt(s, at + 1) >= 0xdc00 &&
      N.charCodeAt(s, at + 1) <= 0xdfff ? at + 2 : at + 1;
  }
  // a replacement string's $$, $&, $`, $' and $1..$99, as String.prototype.replace reads them
  function rxExpand(rep, m, s) {
    var out = '',
      i = 0;
    while (i < rep.length) {
      var c = rep[i],
        d = rep[i + 1];
      if (c !== '$' || d === undefined) {
        out += c;
        i++;
        continue;
      }
      var two = d >= '0' && d <= '9' && rep[i + 2] >= '0' && rep[i + 2] <= '9' ? +(d + rep[i + 2]) : -1,
        wide = two > 0 && two < m.length,
        n = wide ? two : d >= '1' && d <= '9' && +d < m.length ? +d : -1;
      if (d === '$') out += '$';
      else if (d === '&') out += m[0];
      else if (d === '`') out += NAT.sSlice(s, 0, m.index);
      else if (d === "'") out += NAT.sSlice(s, m.index + m[0].length);
      else if (n > 0) out += m[n] === undefined ? '' : m[n];
      else out += '$' + d;
      i += wide ? 3 : 2;
    }
    return out;
  }
  function rxReplace(s, pattern, rep) {
    s = String(s);
    var found;
    if (typeof pattern === 'string') {
      var at = NAT.sIndexOf(s, pattern);
      found = at === -1 ? [] : [{ 0: pattern, length: 1, index: at }];
    } else found = rxMatches(pattern, s, NAT.sIndexOf(NAT.flags(pattern), 'g') !== -1);
    var out = '',
      last = 0;
    for (var i = 0; i < found.length; i++) {
      var m = found[i];
      out += NAT.sSlice(s, last, m.index);
      if (typeof rep === 'function') {
        var args = NAT.aSlice(m, 0);
        args[args.length] = m.index;
        args[args.length] = s;
        out += String(NAT.apply(rep, undefined, args));
      } else out += rxExpand(String(rep), m, s);
      last = m.index + m[0].length;
    }
    return out + NAT.sSlice(s, last);
  }
  function rxSplit(s, sep, limit) {
    s = String(s);
    var out = [],
      last = 0,
      max = limit === undefined ? 4294967295 : limit >>> 0;
    if (max === 0) return out;
    if (typeof sep === 'string' && sep !== '') {
      for (var at = NAT.sIndexOf(s, sep); at !== -1 && out.length < max; at = NAT.sIndexOf(s, sep, last)) {
        out[out.length] = NAT.sSlice(s, last, at);
        last = at + sep.length;
      }
    } else {
      var re = sep === '' ? /(?:)/ : sep;
      if (s === '') return NAT.exec(new NAT.RegExp(NAT.source(re), NAT.flags(re)), s) === null ? [s] : [];
      var found = rxMatches(re, s, true, true);
      for (var i = 0; i < found.length && out.length < max; i++) {
        var m = found[i];
        if (m[0].length === 0 && (m.index === last || m.index >= s.length)) continue;
        out[out.length] = NAT.sSlice(s, last, m.index);
        for (var k = 1; k < m.length && out.length < max; k++) out[out.length] = m[k];
        last = m.index + m[0].length;
      }
    }
    if (out.length < max) out[out.length] = NAT.sSlice(s, last);
    return out;
  }

  // Methods by the prototype that holds them: a built-in object (an array, a Map, a promise, a node, a
  // socket...) gets the method its true prototype held when the SDK started; anything else (the SDK's own
  // objects, a page's thenable) its own.  A page that gives an object a prototype of its own (a custom
  // element's class) gets what that prototype says, as its own objects would.
  var HELD_PLATFORM = ['EventTarget', 'Node', 'Element', 'HTMLElement', 'SVGElement', 'Document',
    'DocumentFragment', 'ShadowRoot', 'HTMLFormElement', 'HTMLInputElement', 'HTMLTextAreaElement',
    'HTMLSelectElement', 'HTMLSlotElement', 'HTMLAnchorElement', 'HTMLCollection', 'HTMLFormControlsCollection',
    'NodeList', 'Window', 'Storage', 'MutationObserver', 'PerformanceObserver', 'PerformanceObserverEntryList',
    'Performance', 'Response', 'Request', 'Headers', 'FormData', 'URLSearchParams', 'Blob', 'ReadableStream',
    'ReadableStreamDefaultReader', 'TextDecoder', 'WebSocket', 'XMLHttpRequest', 'EventSource', 'Crypto',
    'WeakRef', 'Selection', 'Range', 'History', 'Animation', 'DataTransfer', 'Event', 'CustomEvent',
    'CSSStyleDeclaration', 'Navigator', 'BroadcastChannel', 'MessagePort'];
  // every other method the SDK calls, by name: N.get(map, k) is map.get(k) through the held method
  var HELD_NAMES = ['forEach', 'get', 'set', 'has', 'add', 'delete', 'then', 'catch', 'getAttribute',
    'hasAttribute', 'closest', 'contains', 'addEventListener', 'removeEventListener', 'dispatchEvent',
    'querySelector', 'querySelectorAll', 'focus', 'blur', 'click', 'submit', 'requestSubmit', 'observe',
    'disconnect', 'takeRecords', 'getItem', 'setItem', 'getBoundingClientRect', 'cancel', 'decode', 'read',
    'close', 'getRootNode', 'clone', 'text', 'deref', 'getReader', 'matches', 'scrollIntoView',
    'elementFromPoint', 'getElementById', 'getComputedStyle', 'getSelection', 'createRange',
    'selectNodeContents', 'collapse', 'removeAllRanges', 'addRange', 'execCommand', 'setSelectionRange',
    'setData', 'send', 'getRandomValues', 'randomUUID', 'setRequestHeader', 'getAllResponseHeaders',
    'getResponseHeader', 'getEntriesByType', 'getEntries', 'namedItem', 'assignedElements', 'replaceState',
    'hasFocus'];
  function captureHeld() {
    var protos = [Object.prototype, Array.prototype, String.prototype, RegExp.prototype, Map.prototype,
      Set.prototype, WeakMap.prototype, WeakSet.prototype, Promise.prototype, Number.prototype,
      Function.prototype, Date.prototype];
    for (var i = 0; i < HELD_PLATFORM.length; i++) {
      var C = window[HELD_PLATFORM[i]];
      if (typeof C === 'function' && C.prototype) protos[protos.length] = C.prototype;
    }
    NAT.held = new NAT.Map();
    NAT.found = new NAT.WeakMap();
    NAT.mapGet = uncurry(NAT.Map.prototype.get);
    var mapSet = uncurry(NAT.Map.prototype.set);
    for (var p = 0; p < protos.length; p++) {
      var names = NAT.names(protos[p]),
        held = NAT.create(null);
      for (var n = 0; n < names.length; n++) {
        var d = NAT.gopd(protos[p], names[n]);
        if (d && typeof d.value === 'function') held[names[n]] = d.value;
      }
      mapSet(NAT.held, protos[p], held);
    }
    NAT.descs = new NAT.Map();
    for (p = 0; p < protos.length; p++) {
      var all = NAT.create(null);
      names = NAT.names(protos[p]);
      for (n = 0; n < names.length; n++) all[names[n]] = NAT.gopd(protos[p], names[n]);
      mapSet(NAT.descs, protos[p], all);
    }
    for (var b = 0; b < HELD_NAMES.length; b++) N[HELD_NAMES[b]] = byName(HELD_NAMES[b]);
    N.invoke = invoke;
    N.descOf = descOf;
  }
  // a property's descriptor as a built-in prototype held it when the SDK started (a page may redefine
  // Document.prototype.cookie's accessors, or a form's): the live one for any other object
  function descOf(proto, key) {
    var held = NAT.mapGet(NAT.descs, proto);
    return held !== undefined && held[key] !== undefined ? held[key] : NAT.gopd(proto, key);
  }
  function heldMethod(x, name) {
    if (x === null || x === undefined) return null;
    var first = NAT.gpo(Object(x)),
      known = NAT.wmGet(NAT.found, first); // what a walk from this prototype found before
    if (known !== undefined && known[name] !== undefined) return known[name];
    for (var p = first, hops = 0; p !== null && hops < 64; p = NAT.gpo(p), hops++) {
      var held = NAT.mapGet(NAT.held, p);
      if (held !== undefined && held[name] !== undefined) {
        if (known === undefined) NAT.wmSet(NAT.found, first, (known = NAT.create(null)));
        return (known[name] = held[name]);
      }
      if (held === undefined && N.hasOwn(p, name)) return null; // a prototype of the page's own comes first
    }
    return null;
  }
  // N.invoke(x, 'name', a, b) is x.name(a, b) through the method x's built-in prototype held
  function invoke(x, name) {
    return NAT.apply(heldMethod(x, name) || x[name], x, restOf(arguments, 2));
  }
  function byName(name) {
    return function (x) {
      return NAT.apply(heldMethod(x, name) || x[name], x, restOf(arguments, 1));
    };
  }
  // the arguments from `from` on, as an array (built by index: no method a page could have patched)
  function restOf(list, from) {
    var out = [];
    for (var i = from; i < list.length; i++) out[i - from] = list[i];
    return out;
  }

  // JSON.stringify asks each object for a toJSON at call time (a page may put one on Object.prototype and
  // rewrite every message): while one of the prototypes the SDK's values come from has one, the SDK writes
  // its JSON itself, from own enumerable keys alone.
  var TO_JSON = [Object.prototype, Array.prototype, String.prototype, Number.prototype, Boolean.prototype];
  function ownJson(v) {
    if (v === null || typeof v !== 'object') return typeof v === 'function' ? undefined : NAT.stringify(v);
    if (v instanceof Date) return NAT.stringify(N.dateISO(v));
    var out = [],
      i;
    if (N.isArray(v)) {
      for (i = 0; i < v.length; i++) {
        var item = ownJson(v[i]);
        out[i] = item === undefined ? 'null' : item;
      }
      return '[' + N.join(out, ',') + ']';
    }
    var keys = N.keys(v);
    for (i = 0; i < keys.length; i++) {
      var val = ownJson(v[keys[i]]);
      if (val !== undefined) out[out.length] = NAT.stringify(keys[i]) + ':' + val;
    }
    return '{' + N.join(out, ',') + '}';
  }
  function stringify(v) {
    for (var i = 0; i < TO_JSON.length; i++) if (N.hasOwn(TO_JSON[i], 'toJSON')) return ownJson(v);
    return NAT.stringify(v);
  }
  captureFunctions();
  captureRegExp();
  captureHeld();
  N.stringify = stringify;
  /* eslint-enable no-restricted-syntax */
