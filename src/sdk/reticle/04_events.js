  // == Section: events == the tab's state and the event queue
  // provides: S, CHURN, now, internal, guard, emit, trimOutbox, busy, scheduleFlush, rawSend, record, flush,
  //   sendResult
  // uses: BATCH_MAX_BYTES (01), BATCH_MAX_EVENTS (01), BUFFERED_MAX (01), MAX_FRAME (01), N (01),
  //   OPEN_QUEUE_MAX (01), QUEUE_MAX (01), RESULT_QUEUE_MAX (01), clip (03), errMsg (03), microtask (03),
  //   rand36 (03), sanitize (03), refFor (06), textWatchAnswered (13)
  // ---- state ---------------------------------------------------------------------------------
  var S = {
    started: false, // connect() ran and passed the guards
    stopped: false, // disconnect() or a 1008 close: no more retries
    opts: {},
    url: null,
    token: null,
    sessionId: null,
    documentId: rand36(8),
    ws: null,
    open: false,
    seq: 0,
    backoff: 1000,
    retryTimer: null,
    failures: 0,
    everOpened: false,
    hintShown: false,
    outbox: [], // pending events: {s: serialized, churn: bool}
    results: [], // pending command_result frames while offline
    dropped: 0, // events dropped from the offline queue since the last report
    busyDropped: 0, // events dropped while open because the socket was backed up
    drainTimer: null,
    droppedChurn: 0,
    flushScheduled: false,
    captureBodies: true,
    teardowns: [],
    internalErrors: 0,
    adapters: [],
    caps: { testids: [], signals: [], stores: [], flows: [] },
    hasCaps: false,
    signalsSeen: {}
  };
  var CHURN = {
    'dom.text': 1,
    'anim.start': 1,
    'anim.end': 1,
    'page.health': 1,
    'scroll.position': 1,
    'render.commit': 1,
    'dom.attr': 1
  };

  function now() {
    return N.round(N.now() * 10) / 10;
  }

  // report an internal failure without throwing into the app
  function internal(site, e) {
    S.internalErrors++;
    if (S.internalErrors > 50) return;
    try {
      var d = {
        reason: 'sdk-error',
        kind: 'sdk-failed',
        site: site,
        count: 1,
        detail: clip(errMsg(e), 500)
      };
      if (S.internalErrors === 50) d.note = 'further internal errors are not reported';
      emit('blind-spot', d);
    } catch (x) {
      /* nothing else we can do */
    }
  }
  function guard(site, fn) {
    return function () {
      try {
        return N.apply(fn, this, arguments);
      } catch (e) {
        internal(site, e);
      }
    };
  }

  // ---- events --------------------------------------------------------------------------------
  // emit(type, data, el?) - stamps the envelope and queues it for the next microtask flush.
  function emit(type, data, el) {
    if (!S.started) return;
    if (type === 'net.request') textWatchAnswered();
    try {
      var ev = {
        type: type,
        t: now(),
        seq: S.seq++,
        sessionId: S.sessionId,
        documentId: S.documentId,
        data: null
      };
      if (el && el.nodeType === 1) {
        var r = refFor(el);
        if (r) ev.ref = r;
      } else if (typeof el === 'string') ev.ref = el;
      var s;
      var instead = function (why) {
        // the same event, its data replaced by why it could not travel
        var stub = { type: type, t: ev.t, seq: ev.seq, sessionId: S.sessionId, documentId: S.documentId };
        if (ev.ref) stub.ref = ev.ref;
        stub.data = why;
        return N.stringify(stub);
      };
      try {
        ev.data = sanitize(data || {}, { depth: 10, str: 65536, budget: 400000 });
        s = N.stringify(ev);
      } catch (e) {
        s = instead({ unserializable: true });
      }
      if (s.length > MAX_FRAME - 1024) {
        var size = s.length;
        s = instead({ truncatedEvent: true, originalBytes: size });
        N.push(S.outbox, { s: s, churn: false });
        var tr = record('truncated', ev.t, {
          what: type,
          count: 1,
          reason: 'event of ' + size + ' bytes exceeds the frame cap; data dropped',
          channel: 'transport',
          dropped: 1
        });
        N.push(S.outbox, { s: N.stringify(tr), churn: false });
      } else {
        N.push(S.outbox, { s: s, churn: !!CHURN[type] });
      }
      if (!S.open) S.dropped += trimOutbox(QUEUE_MAX);
      else if (S.outbox.length > OPEN_QUEUE_MAX) S.busyDropped += trimOutbox(OPEN_QUEUE_MAX);
      scheduleFlush();
    } catch (e) {
      /* emit must never throw */
    }
  }
  // Drop down to `limit` queued events, churn first; returns how many went.
  function trimOutbox(limit) {
    var gone = 0;
    while (S.outbox.length > limit) {
      var idx = -1;
      for (var i = 0; i < S.outbox.length; i++) {
        if (S.outbox[i].churn) {
          idx = i;
          break;
        }
      }
      if (idx < 0) idx = 0;
      else S.droppedChurn++;
      N.splice(S.outbox, idx, 1);
      gone++;
    }
    return gone;
  }
  function busy() {
    return !!(S.ws && S.ws.bufferedAmount > BUFFERED_MAX);
  }
  function scheduleFlush() {
    if (S.flushScheduled || !S.open) return;
    S.flushScheduled = true;
    microtask(flush);
  }
  function rawSend(str) {
    try {
      if (S.ws && S.open) {
        N.send(S.ws, str);
        return true;
      }
    } catch (e) {
      /* socket died */
    }
    return false;
  }
  // An event made by the transport itself (its losses), stamped like any other.
  function record(type, t, data) {
    return { type: type, t: t, seq: S.seq++, sessionId: S.sessionId, documentId: S.documentId, data: data };
  }
  function flush() {
    S.flushScheduled = false;
    if (!S.open) return;
    try {
      while (S.results.length) {
        if (!rawSend(S.results[0])) return;
        N.shift(S.results);
      }
      if (S.busyDropped > 0) {
        var lost = record('blind-spot', now(), {
          reason: 'outbox-overflow',
          kind: 'transport-overflow',
          count: S.busyDropped,
          detail:
            S.busyDropped +
            ' event(s) were dropped because the page produced them faster than the socket carried them'
        });
        N.unshift(S.outbox, { s: N.stringify(lost), churn: false });
        S.busyDropped = 0;
      }
      while (S.outbox.length) {
        if (busy()) {
          if (!S.drainTimer)
            S.drainTimer = N.setTimeout(function () {
              S.drainTimer = null;
              scheduleFlush();
            }, 50);
          return;
        }
        var n = 0,
          bytes = 0,
          parts = [];
        while (n < S.outbox.length && n < BATCH_MAX_EVENTS) {
          var len = S.outbox[n].s.length;
          if (n > 0 && bytes + len > BATCH_MAX_BYTES) break;
          N.push(parts, S.outbox[n].s);
          bytes += len + 1;
          n++;
        }
        var frame =
          parts.length === 1
            ? '{"kind":"event","event":' + parts[0] + '}'
            : '{"kind":"events","events":[' + N.join(parts, ',') + ']}';
        if (!rawSend(frame)) return;
        N.splice(S.outbox, 0, n);
      }
    } catch (e) {
      internal('transport', e);
    }
  }
  function sendResult(obj) {
    var s;
    try {
      s = N.stringify(obj);
    } catch (e) {
      s = N.stringify({
        kind: 'command_result',
        id: obj.id,
        ok: false,
        error: 'result could not be serialized: ' + clip(errMsg(e), 300)
      });
    }
    if (s.length > MAX_FRAME - 256) {
      var size = s.length;
      s = N.stringify({
        kind: 'command_result',
        id: obj.id,
        ok: false,
        error:
          'result of ' +
          size +
          ' bytes exceeds the ' +
          MAX_FRAME +
          '-byte frame cap; narrow the request (scope, limit, path)'
      });
      emit('truncated', {
        what: 'command_result',
        count: 1,
        reason: 'result exceeded frame cap',
        channel: 'transport',
        dropped: 1
      });
    }
    // events the page made before this answer go first: a verdict that reads the answer must
    // already hold them (a request the handler started, a message it logged)
    if (S.open && !S.results.length && S.outbox.length) flush();
    if (S.open && !S.results.length && !S.outbox.length && rawSend(s)) return;
    N.push(S.results, s);
    scheduleFlush();
    if (S.results.length > RESULT_QUEUE_MAX) {
      N.shift(S.results);
      S.dropped++;
    }
  }

