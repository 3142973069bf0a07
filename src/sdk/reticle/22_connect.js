  // == Section: connect == connect, disconnect, auto-connect
  // provides: isLoopback, isLocalPage, defaultUrl, boolOpt, connect, onPageHide, onPageShow, connectBridge,
  //   connectSessionId, stripReloadMarker, installObservers, disconnect, api
  // uses: CFG (01), N (01), SCRIPT_EL (01), VERSION (01), EXTRA_KEYS (03), clip (03), ssGet (03),
  //   ssSet (03), uuid (03), warn (03), S (04), flush (04), internal (04), clearMarkCookie (05),
  //   openSocket (05), retryNow (05), describe (07), installBeacon (12), installEventSource (12),
  //   installFetch (12), installWebSocket (12), installXHR (12), installAlerts (13), installConsole (14),
  //   installErrors (14), installDocuments (15), installRouting (15), installAnimations (16),
  //   installDom (16), installShadowCapture (16), installStorage (17), checkFrames (18),
  //   installDialogs (18), installFocus (18), installHealth (18), STORES (19), describeContract (19),
  //   pushStore (19), registerStore (19), signal (19)
  // ---- connect / disconnect ------------------------------------------------------------------
  function isLoopback(h) {
    h = N.toLowerCase(String(h || ''));
    if (h === 'localhost' || h === '::1' || h === '[::1]') return true;
    var m = N.exec(/^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/, h);
    return !!(m && +m[1] < 256 && +m[2] < 256 && +m[3] < 256);
  }
  function isLocalPage() {
    var p = location.protocol;
    if (p === 'file:' || p === 'app:' || p === 'tauri:') return true;
    return isLoopback(location.hostname);
  }
  function defaultUrl() {
    try {
      if (CFG.url) return String(CFG.url);
      var src = SCRIPT_EL && SCRIPT_EL.src;
      if (src) {
        var u = new URL(src, location.href);
        return (u.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + u.host + '/reticle';
      }
      if (CFG.port) return 'ws://127.0.0.1:' + CFG.port + '/reticle';
    } catch (e) {
      /* fall through */
    }
    return 'ws://127.0.0.1:4400/reticle';
  }
  function boolOpt(v) {
    return v === true || v === 'true' || v === '' || v === '1' || v === 'yes';
  }
  function connect(options) {
    try {
      if (S.started) return window.reticle;
      var o = options || {};
      var token = o.token != null ? String(o.token) : null;
      var bridge = connectBridge(o, token);
      if (!bridge) return window.reticle;
      S.opts = o;
      S.url = bridge.href;
      S.token = token;
      S.captureBodies = !(
        o.captureBodies === false ||
        o.captureBodies === 'false' ||
        o.captureNetworkBodies === false
      );
      if (N.isArray(o.redactKeys)) EXTRA_KEYS = N.slice(o.redactKeys, 0, 64);
      else if (o.redact && N.isArray(o.redact.keys)) EXTRA_KEYS = N.slice(o.redact.keys, 0, 64);
      S.sessionId = connectSessionId(o);
      ssSet('__reticle_session', S.sessionId);
      stripReloadMarker(); // before the route observer installs
      clearMarkCookie(); // the request that brought this document carried it: the page never sees it
      S.started = true;
      S.stopped = false;
      installObservers();
      var fc = function () {
        checkFrames();
      };
      if (document.readyState === 'loading')
        N.addEventListener(document, 'DOMContentLoaded', fc, { once: true });
      else N.setTimeout(fc, 0);
      N.addEventListener(window, 'load', fc, { once: true });
      N.addEventListener(window, 'pagehide', onPageHide, true);
      N.addEventListener(window, 'pageshow', onPageShow, true);
      openSocket();
    } catch (e) {
      internal('connect', e);
    }
    return window.reticle;
  }
  // A page the browser keeps in its back/forward cache is frozen with its socket open: the daemon would
  // hold a tab that answers nothing while the tab shows another page (one without the script tag: an
  // error page).  So the socket closes when the page goes into the cache and opens again, the same
  // session, when the page comes back from it.
  function onPageHide(e) {
    if (!e || !e.persisted || !S.ws) return;
    var ws = S.ws;
    S.ws = null;
    S.open = false;
    try {
      N.close(ws, 1000, 'back-forward cache'); // (a page may close with 1000 or 3000-4999 only)
    } catch (x) {
      /* already closing */
    }
  }
  function onPageShow(e) {
    if (e && e.persisted) retryNow();
  }
  // The bridge URL this page may connect to, or null (with a console warning that says why not).
  function connectBridge(o, token) {
    var url = o.url || defaultUrl();
    // a device's own bridge URL carries its capability, so the page may be off loopback
    var allowRemote = boolOpt(o.allowNonLocalhost) || !!CFG.device;
    var bridge;
    try {
      bridge = new URL(url, location.href);
    } catch (e) {
      warn('not connecting: bridge URL ' + clip(url, 200) + ' does not parse');
      return null;
    }
    if (bridge.protocol !== 'ws:' && bridge.protocol !== 'wss:') {
      warn('not connecting: bridge URL must be ws: or wss: (got ' + bridge.protocol + ')');
      return null;
    }
    if (token && token.length > 512) {
      warn('not connecting: token longer than 512 characters');
      return null;
    }
    var localPage = isLocalPage(),
      localBridge = isLoopback(bridge.hostname);
    if (!localPage || !localBridge) {
      if (!allowRemote || !(token || CFG.device)) {
        warn(
          'not running on ' +
            (localPage
              ? 'this bridge (' + bridge.host + ')'
              : 'a non-loopback page (' + location.hostname + ')') +
            ': reticle is a local development tool. To opt in, connect with allowNonLocalhost:true and the ' +
            'pairing token (data-allow-non-localhost and data-token on the script tag).'
        );
        return null;
      }
      // a device's relay opens its socket on the link its daemon's DevTools connection already uses (a
      // browser on another host, named by the user): that link carries no less than this socket
      if (!localBridge && bridge.protocol !== 'wss:' && !CFG.device) {
        warn('not connecting: a non-loopback bridge must use wss: (start the daemon with --tls)');
        return null;
      }
    }
    try {
      var ne = window.process && window.process.env && window.process.env.NODE_ENV;
      if (ne === 'production' && !boolOpt(o.allowInProduction)) {
        warn('not running: NODE_ENV is production (pass allowInProduction:true to override)');
        return null;
      }
    } catch (e) {
      /* no process */
    }
    return bridge;
  }
  // session id: explicit option > sessionStorage (this origin's, this tab's) > new; never from the URL,
  // which any link can set (the daemon binds a tab to the origin that opened it in any case)
  function connectSessionId(o) {
    var sid = o.sessionId || o.session;
    if (sid === 'auto') sid = null;
    if (!sid) sid = ssGet('__reticle_session');
    if (!sid || typeof sid !== 'string' || sid.length > 128) sid = 's' + uuid();
    return sid;
  }
  // strip our hard-reload marker from the address bar
  function stripReloadMarker() {
    try {
      if (N.test(/[?&]_reticle_reload=/, location.search)) {
        var cu = new URL(location.href);
        N.delete(cu.searchParams, '_reticle_reload');
        N.replaceState(history, history.state, '', cu.href);
      }
    } catch (e) {
      /* ignore */
    }
  }
  // Every observer, in this order; one that fails is reported and the others still install.
  function installObservers() {
    var installers = [
      ['network_observer', installFetch],
      ['network_observer', installXHR],
      ['network_observer', installBeacon],
      ['network_observer', installWebSocket],
      ['network_observer', installEventSource],
      ['alert_observer', installAlerts],
      ['console_observer', installConsole],
      ['console_observer', installErrors],
      ['router_observer', installRouting],
      ['document_observer', installDocuments],
      ['dom_observer', installDom],
      ['dom_observer', installShadowCapture],
      ['animation_observer', installAnimations],
      ['storage_observer', installStorage],
      ['focus_observer', installFocus],
      ['dialog_observer', installDialogs],
      ['health_observer', installHealth]
    ];
    N.forEach(installers, function (it) {
      try {
        it[1]();
      } catch (e) {
        internal(it[0], e);
      }
    });
  }
  function disconnect() {
    try {
      S.stopped = true;
      if (S.retryTimer) {
        N.clearTimeout(S.retryTimer);
        S.retryTimer = null;
      }
      flush();
      var ws = S.ws;
      S.ws = null;
      S.open = false;
      if (ws) {
        try {
          N.close(ws, 1000, 'disconnect');
        } catch (e) {
          /* ignore */
        }
      }
      var tds = N.splice(S.teardowns, 0);
      for (var i = tds.length - 1; i >= 0; i--) {
        try {
          tds[i]();
        } catch (e) {
          /* ignore */
        }
      }
      N.forEach(N.keys(STORES), function (n) {
        if (STORES[n].unsub) {
          try {
            STORES[n].unsub();
          } catch (e) {
            /* ignore */
          }
        }
      });
      S.started = false;
      S.outbox = [];
      S.results = [];
    } catch (e) {
      /* never throw */
    }
  }

  var api = {
    connect: connect,
    disconnect: disconnect,
    signal: signal,
    registerStore: registerStore,
    pushStore: pushStore,
    describe: describeContract,
    version: VERSION
  };
  N.defineProperty(api, 'sessionId', {
    get: function () {
      return S.sessionId;
    },
    enumerable: true
  });
  N.defineProperty(api, 'connected', {
    get: function () {
      return S.open;
    },
    enumerable: true
  });
  N.defineProperty(api, '__reticleSdk', { value: true });
  try {
    N.defineProperty(window, 'reticle', {
      value: api,
      configurable: true,
      enumerable: false,
      writable: false
    });
  } catch (e) {
    window.reticle = api;
  }

  // ---- auto-connect from the script tag ------------------------------------------------------
  try {
    var ds = (SCRIPT_EL && SCRIPT_EL.dataset) || {};
    var auto = ds.auto !== 'false' && CFG.autoConnect !== false;
    if (auto) {
      var o = {};
      if (ds.token) o.token = ds.token;
      if (ds.url) o.url = ds.url;
      if (ds.allowNonLocalhost != null) o.allowNonLocalhost = boolOpt(ds.allowNonLocalhost);
      if (ds.captureBodies != null)
        o.captureBodies = !(
          ds.captureBodies === 'false' ||
          ds.captureBodies === '0' ||
          ds.captureBodies === 'no'
        );
      if (ds.sessionId) o.sessionId = ds.sessionId;
      if (ds.allowInProduction != null) o.allowInProduction = boolOpt(ds.allowInProduction);
      if (CFG.device) {
        o.url = CFG.bridge;
        o.sessionId = CFG.sessionId;
      }
      connect(o);
    }
  } catch (e) {
    /* never throw into the page */
  }
})();
