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
  //   FRAME_DATA_CAP, STACK_CAP, ERROR_CAP, REDACTED, PREFIX, N
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

