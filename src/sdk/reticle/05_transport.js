  // == Section: transport == the socket, the hello, the server's mark, the command dispatcher
  // provides: helloFrame, sendHello, openSocket, onFail, retryNow, MARK, MARK_LOW, onServerMark, rawCookie,
  //   markPath, clearMarkCookie, takeMark, traceparent, markable, markDocument, COMMANDS, onMessage
  // uses: ERROR_CAP (01), N (01), PROTOCOL_VERSION (01), QUEUE_MAX (01), VERSION (01), EXTRA_KEYS (03),
  //   clip (03), errCode (03), errMsg (03), isObj (03), redactUrl (03), sanitize (03), warn (03), S (04),
  //   flush (04), guard (04), internal (04), now (04), rawSend (04), record (04), sendResult (04),
  //   onInputResult (10), emitHealth (18)
  // ---- hello / socket ------------------------------------------------------------------------
  function helloFrame() {
    var h = {
      kind: 'hello',
      protocolVersion: PROTOCOL_VERSION,
      sessionId: S.sessionId,
      url: clip(redactUrl(location.href), 4000),
      title: clip(document.title || '', 500),
      adapters: N.slice(S.adapters, 0, 32),
      sdkVersion: VERSION,
      hasCapabilities: S.hasCaps,
      documentId: S.documentId,
      serverMark: true
    };
    if (S.token) h.token = S.token;
    if (EXTRA_KEYS.length)
      h.redactKeys = N.slice(N.filter(EXTRA_KEYS, function (k) {
        return typeof k === 'string';
      }), 0, 64);
    return N.stringify(h);
  }
  function sendHello() {
    if (S.open) rawSend(helloFrame());
  }

  function openSocket() {
    if (S.stopped || !S.started) return;
    if (S.ws) return;
    S.retryTimer = null;
    var ws;
    try {
      ws = N.BridgeSocket ? N.BridgeSocket(S.url) : new N.WebSocket(S.url);
    } catch (e) {
      onFail(null);
      return;
    }
    S.ws = ws;
    ws.onopen = guard('transport', function () {
      if (S.ws !== ws) return;
      var again = S.everOpened;
      S.open = true;
      S.everOpened = true;
      S.failures = 0;
      S.backoff = 1000;
      rawSend(helloFrame());
      if (S.dropped > 0) {
        var ev = record('blind-spot', now(), {
          reason: 'offline-queue-overflow',
          kind: 'transport-overflow',
          count: S.dropped,
          detail:
            S.dropped +
            ' event(s) were dropped while the daemon was unreachable (queue holds ' +
            QUEUE_MAX +
            '; ' +
            S.droppedChurn +
            ' were churn)'
        });
        var ov = record('transport.overflow', ev.t, { dropped: S.dropped });
        N.unshift(S.outbox, { s: N.stringify(ov), churn: false });
        N.unshift(S.outbox, { s: N.stringify(ev), churn: false });
        S.dropped = 0;
        S.droppedChurn = 0;
      }
      flush();
      if (again) emitHealth('reconnect');
    });
    ws.onmessage = function (m) {
      try {
        onMessage(m.data);
      } catch (e) {
        internal('command', e);
      }
    };
    ws.onerror = function () {
      try {
        N.close(ws);
      } catch (e) {
        /* already closing */
      }
    };
    ws.onclose = guard('transport', function (ev) {
      if (S.ws !== ws) return;
      S.ws = null;
      S.open = false;
      if (ev && ev.code === 1008) {
        S.stopped = true;
        warn(
          'the daemon refused this page (1008' +
            (ev.reason ? ': ' + ev.reason : '') +
            '); not retrying. Check the pairing token and the daemon logs.'
        );
        return;
      }
      onFail(ev);
    });
  }
  function onFail() {
    S.ws = null;
    S.open = false;
    if (S.stopped) return;
    S.failures++;
    if (!S.everOpened && S.failures === 3 && !S.hintShown) {
      S.hintShown = true;
      warn(
        'cannot reach the daemon at ' +
          S.url +
          ' (3 attempts). Is it running (reticle status) and on this port? ' +
          'An https page cannot open a ws:// socket. Retrying quietly.'
      );
    }
    var delay = S.backoff;
    S.backoff = N.min(30000, S.backoff * 2);
    if (S.retryTimer) N.clearTimeout(S.retryTimer);
    S.retryTimer = N.setTimeout(openSocket, delay);
  }
  function retryNow() {
    if (S.stopped || !S.started || S.ws) return;
    S.backoff = 1000;
    if (S.retryTimer) {
      N.clearTimeout(S.retryTimer);
      S.retryTimer = null;
    }
    openSocket();
  }

  // ---- server truth: the marks the app's middleware reports this tab's requests by ------------
  // The daemon hands each document a pool of one-use marks, [id, secret]. A same-origin fetch/XHR
  // carries one secret in a header (no other origin can read a request's headers) and its
  // net.pending names the id, which the daemon files the server's record under. A document
  // request, which cannot carry a header, carries one in a cookie set just before the page
  // leaves, scoped to the destination's path and living seconds; another port's page can read
  // that cookie, so the daemon takes it only from a request the browser says this origin (or the
  // user) sent. Cross-origin requests are never marked.
  var MARK = { pool: [], on: false, asked: false, header: 'X-Reticle-Mark', cookie: '__reticle_mark' };
  var MARK_LOW = 32; // marks left when the SDK asks the daemon for more
  function onServerMark(msg) {
    if (!N.isArray(msg.marks)) return;
    if (msg.reset) MARK.pool = [];
    N.forEach(msg.marks, function (m) {
      if (N.isArray(m) && N.test(/^[A-Za-z0-9_-]{1,32}$/, m[0]) && N.test(/^[0-9a-f]{32}$/, m[1]))
        N.push(MARK.pool, [String(m[0]), String(m[1])]);
    });
    MARK.on = true;
    MARK.asked = false;
    if (typeof msg.header === 'string') MARK.header = msg.header;
    if (typeof msg.cookie === 'string') MARK.cookie = msg.cookie;
    if (msg.reset) clearMarkCookie();
  }
  // Through the native accessor: the storage observer's cookie patch must not report our own cookie.
  function rawCookie(value) {
    var desc = N.descOf(N.Document.prototype, 'cookie');
    if (value === undefined) return desc && desc.get ? String(N.call(desc.get, document)) : String(document.cookie);
    if (desc && desc.set) N.call(desc.set, document, value);
    else document.cookie = value;
    return '';
  }
  // A cookie path for url's path: up to its last '/', without anything a cookie attribute could misread.
  function markPath(url) {
    var path;
    try {
      path = new URL(url, location.href).pathname;
    } catch (e) {
      return '/';
    }
    var bad = N.search(path, /[^A-Za-z0-9\-._~%!$&'()*+=:@/]/);
    return bad === -1 ? path : N.slice(path, 0, N.lastIndexOf(path, '/', bad) + 1) || '/';
  }
  function clearMarkCookie() {
    try {
      if (N.indexOf(rawCookie(), MARK.cookie + '=') !== -1) {
        rawCookie(MARK.cookie + '=; path=/; max-age=0; samesite=strict');
        rawCookie(MARK.cookie + '=; path=' + markPath(location.href) + '; max-age=0; samesite=strict');
      }
    } catch (e) {
      /* cookies refused */
    }
  }
  // The next mark for a request to this document's own origin: [id, secret]; false when the pool
  // ran dry (the request goes unmarked and the server's side of it is unknown); asks for more.
  function takeMark() {
    var m = N.shift(MARK.pool) || false;
    if (MARK.pool.length <= MARK_LOW && !MARK.asked && S.open) {
      MARK.asked = true;
      rawSend(N.stringify({ kind: 'marks' }));
    }
    return m;
  }
  // The W3C trace context of a marked request: its mark's secret is the trace id (the daemon files
  // the server's OpenTelemetry spans under it), the parent span id is random, the trace sampled.
  function traceparent(secret) {
    var parent = '';
    try {
      var b = new Uint8Array(8);
      N.getRandomValues(crypto, b);
      for (var i = 0; i < 8; i++) parent += (b[i] < 16 ? '0' : '') + N.invoke(b[i], 'toString', 16);
    } catch (e) {
      parent = '';
    }
    if (!N.test(/[1-9a-f]/, parent)) parent = '00f067aa0ba902b7';
    return '00-' + secret + '-' + parent + '-01';
  }
  // Is url a request the server of this document may be asked to mark (same origin, marks on)?
  function markable(url) {
    if (!MARK.on) return false;
    try {
      return new URL(url, location.href).origin === location.origin;
    } catch (e) {
      return false;
    }
  }
  function markDocument(mark, url) {
    try {
      var path = url ? markPath(url) : '/';
      rawCookie(MARK.cookie + '=' + mark[1] + '; path=' + path + '; max-age=10; samesite=strict');
    } catch (e) {
      /* cookies refused */
    }
  }

  // ---- commands ------------------------------------------------------------------------------
  var COMMANDS = {};
  function onMessage(raw) {
    if (typeof raw !== 'string') return;
    var msg;
    try {
      msg = N.parse(raw);
    } catch (e) {
      return;
    }
    if (isObj(msg) && msg.kind === 'input_result') return onInputResult(msg);
    if (isObj(msg) && msg.kind === 'mark') return onServerMark(msg);
    if (!isObj(msg) || msg.kind !== 'command') return;
    var id = msg.id;
    if (typeof id !== 'string' && typeof id !== 'number') return;
    function fail(error, code) {
      var r = { kind: 'command_result', id: id, ok: false, error: clip(String(error), ERROR_CAP) };
      if (typeof code === 'string') r.code = code;
      sendResult(r);
    }
    if (typeof msg.name !== 'string') {
      fail('malformed command (no name); version skew, nothing ran');
      return;
    }
    if (msg.sessionId != null && msg.sessionId !== S.sessionId) {
      fail(
        'command addressed to session ' +
          clip(msg.sessionId, 140) +
          ' but this page is session ' +
          S.sessionId +
          '; nothing ran'
      );
      return;
    }
    var h = COMMANDS[msg.name];
    if (!h) {
      fail("unknown command '" + clip(msg.name, 100) + "'");
      return;
    }
    var args = isObj(msg.args) ? msg.args : {};
    var done = false;
    function ok(result) {
      if (done) return;
      done = true;
      var clean;
      try {
        clean = sanitize(result === undefined ? {} : result, {
          depth: 12,
          str: 262144,
          budget: 900000,
          nodes: 20000,
          items: 500
        });
      } catch (e) {
        fail('result could not be serialized: ' + errMsg(e));
        return;
      }
      sendResult({ kind: 'command_result', id: id, ok: true, result: clean });
    }
    function bad(e) {
      if (done) return;
      done = true;
      fail(errMsg(e), errCode(e));
    }
    try {
      var r = h(args, msg);
      if (r && typeof r.then === 'function') N.then(r, ok, bad);
      else ok(r);
    } catch (e) {
      bad(e);
    }
  }

