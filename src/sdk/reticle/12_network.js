  // == Section: network == fetch, XHR, beacon, WebSocket, EventSource: bodies, faults, streams
  // provides: TEXTUAL, STREAMY, redactBody, describeReqBody, withBodyFields, netCounter, isBridgeUrl,
  //   FAULTS, setFaults, faultFor, faultWait, faultHeaders, faultBody, faultedFetch, faultedXhr,
  //   installFetch, fetchWrapper, fetchStart, fetchRequestBody, HANDLING, handlingFailure, fetchFailed,
  //   HEADERS_MAX, HEADER_VALUE_CAP, headerMap, withHeaders, fetchHeaderPairs, xhrHeaderPairs, callRecord,
  //   onFetchResponse, emitRequestWhenRead, fetchResponseRecord, fetchNoBodyReason, fetchReadBody,
  //   STREAM_MAX_MESSAGES, STREAM_MAX_PER_SEC, STREAM_MESSAGE_SCAN, STREAM_UNREAD_MAX, streamFormat,
  //   onPageCancel, watchStream, streamOpen, streamReport, streamMessage, streamSend, streamSseDispatch,
  //   streamLine, streamFeed, streamFinish, streamSafeFeed, streamPump, readCapped, installXHR,
  //   xhrSendStart, xhrLoadend, xhrResponseBody, installBeacon, frameData, frameEvent, swapConstructor,
  //   installWebSocket, installEventSource
  // uses: BODY_CAP (01), BODY_SCAN (01), FRAME_DATA_CAP (01), REDACTED (01), clip (03), errMsg (03),
  //   hasOwn (03), isNativeFn (03), isObj (03), keySensitive (03), redactUrl (03), sanitize (03),
  //   scrubText (03), S (04), emit (04), guard (04), internal (04), MARK (05), markable (05), takeMark (05),
  //   traceparent (05), patch (11), rateCap (11), textWatchAnswered (13), callerStack (14)
  // -- network: bodies
  var TEXTUAL =
    /^(text\/|application\/(json|[\w.+-]*\+json|xml|[\w.+-]*\+xml|x-www-form-urlencoded|graphql|javascript|ecmascript)|application\/problem)/i;
  var STREAMY = /(event-stream|x-ndjson|application\/stream|multipart\/x-mixed-replace)/i;
  function redactBody(text, contentType) {
    // returns {body, truncated, size}
    var size = text.length;
    var out;
    var looksJson = N.test(/json/i, contentType || '') || N.test(/^\s*[[{]/, text);
    if (looksJson && size <= 262144) {
      try {
        var parsed = N.parse(text);
        out = N.stringify(
          sanitize(parsed, { depth: 12, items: 200, str: 4096, budget: BODY_SCAN * 4 })
        );
        // nothing redacted or cut: the body as the server sent it (its spacing, its escapes)
        if (out === N.stringify(parsed) && text.length <= BODY_CAP) out = scrubText(text);
      } catch (e) {
        out = null;
      }
    }
    if (out == null) out = scrubText(text.length > BODY_SCAN ? N.slice(text, 0, BODY_SCAN) : text);
    var truncated = false;
    if (out.length > BODY_CAP) {
      out = N.slice(out, 0, BODY_CAP);
      truncated = true;
    }
    if (size > BODY_SCAN && !looksJson) truncated = true;
    return { body: out, truncated: truncated, size: size };
  }
  function describeReqBody(b) {
    // returns {body?, type?, truncated?}
    if (b == null) return null;
    try {
      if (typeof b === 'string') {
        var r = redactBody(b, '');
        return { body: r.body, truncated: r.truncated };
      }
      if (typeof URLSearchParams !== 'undefined' && b instanceof URLSearchParams) {
        var r2 = redactBody(N.invoke(b, 'toString'), 'application/x-www-form-urlencoded');
        return { body: r2.body, truncated: r2.truncated };
      }
      if (typeof FormData !== 'undefined' && b instanceof FormData) {
        var o = {},
          n = 0;
        N.forEach(b, function (v, k) {
          if (n++ < 50)
            o[k] =
              typeof v === 'string' ? v : '[File ' + (v.name || '') + ' ' + (v.size || 0) + 'B]';
        });
        return { body: N.stringify(sanitize(o, { str: 1000 })), type: 'FormData' };
      }
      if (typeof Blob !== 'undefined' && b instanceof Blob)
        return { type: 'Blob' + (b.type ? ' ' + b.type : '') + ' ' + b.size + 'B' };
      if (b instanceof ArrayBuffer || (ArrayBuffer.isView && N.isView(b)))
        return { type: 'binary ' + (b.byteLength || 0) + 'B' };
      if (typeof ReadableStream !== 'undefined' && b instanceof ReadableStream)
        return { type: 'ReadableStream' };
      if (typeof Document !== 'undefined' && b instanceof Document) return { type: 'Document' };
    } catch (e) {
      /* ignore */
    }
    return { type: typeof b };
  }
  function withBodyFields(d, req, resp) {
    if (!S.captureBodies) {
      d.bodyCaptured = false;
      return d;
    }
    if (req) {
      if (req.body != null) d.requestBody = req.body;
      if (req.type) d.requestBodyType = req.type;
      if (req.truncated) {
        d.requestBodyTruncated = true;
        d.bodyTruncated = true;
      }
    }
    if (resp) {
      if (resp.body != null) {
        d.responseBody = resp.body;
        d.bodyCaptured = true;
      } else {
        d.bodyCaptured = false;
        if (resp.reason) d.bodyNotCapturedReason = resp.reason;
      }
      if (resp.truncated) {
        d.responseBodyTruncated = true;
        d.bodyTruncated = true;
      }
      if (resp.size != null) d.responseSize = resp.size;
    }
    return d;
  }
  var netCounter = 0;
  function isBridgeUrl(u) {
    try {
      var x = new URL(u, location.href);
      var b = new URL(S.url);
      return x.host === b.host && N.test(/^\/reticle(\.js)?$/, x.pathname);
    } catch (e) {
      return false;
    }
  }

  // ---- faults on purpose (reticle_fault with the script tag) ------------------------------------
  // The daemon sends this tab's faults (fault_set); the fetch and XHR wrappers answer a matching
  // request themselves (a status, a failure, a delay) and mark its record with the fault's id.
  var FAULTS = [];
  function setFaults(a) {
    var list = N.isArray(a.faults) ? a.faults : [];
    var now = N.now();
    FAULTS = N.map(N.filter(N.slice(list, 0, 32), isObj), function (f) {
      return {
        id: String(f.id || ''),
        urlContains: String(f.urlContains || ''),
        method: f.method ? N.toUpperCase(String(f.method)) : null,
        resourceType: f.resourceType ? String(f.resourceType) : null,
        delayMs: N.max(0, N.min(60000, +f.delayMs || 0)),
        abort: !!f.abort,
        respond: isObj(f.respond) ? f.respond : null,
        remaining: typeof f.remaining === 'number' ? f.remaining : null,
        until: now + N.max(0, +f.expiresInMs || 0)
      };
    });
    return { faults: FAULTS.length };
  }
  function faultFor(method, url, kind) {
    var now = N.now();
    for (var i = 0; i < FAULTS.length; i++) {
      var f = FAULTS[i];
      if (now >= f.until || f.remaining === 0 || !f.urlContains) continue;
      if (f.method && f.method !== method) continue;
      if (f.resourceType && f.resourceType !== kind) continue;
      if (N.indexOf(String(url), f.urlContains) < 0) continue;
      if (f.remaining !== null) f.remaining--;
      return f;
    }
    return null;
  }
  function faultWait(f) {
    return new N.Promise(function (resolve) {
      if (f.delayMs) N.setTimeout(resolve, f.delayMs);
      else resolve();
    });
  }
  function faultHeaders(f) {
    var h = isObj(f.respond && f.respond.headers) ? f.respond.headers : {};
    var out = [];
    var typed = false;
    for (var k in h) {
      if (hasOwn(h, k)) {
        N.push(out, [String(k), String(h[k])]);
        if (N.toLowerCase(String(k)) === 'content-type') typed = true;
      }
    }
    if (!typed) N.push(out, ['Content-Type', 'text/plain; charset=utf-8']);
    return out;
  }
  function faultBody(f) {
    var b = f.respond && f.respond.body;
    return b == null ? 'Reticle fault ' + f.id : String(b);
  }
  // A fetch the fault answers: a Response of its own, a TypeError as a failed network, or the
  // real request after the delay.
  function faultedFetch(f, orig, self, args) {
    return N.then(faultWait(f), function () {
      if (f.abort) throw new TypeError('Failed to fetch');
      if (!f.respond) return N.apply(orig, self, args);
      return new Response(faultBody(f), { status: +f.respond.status || 500, headers: faultHeaders(f) });
    });
  }
  // An XHR the fault answers: its state and answer are set on the instance, then its events fire.
  function faultedXhr(f, xhr, orig, args) {
    N.then(faultWait(f), guard('network_observer', function () {
        if (!f.abort && !f.respond) return N.apply(orig, xhr, args);
        var status = f.abort ? 0 : +f.respond.status || 500;
        var body = f.abort ? '' : faultBody(f);
        var heads = f.abort ? [] : faultHeaders(f);
        var value = body;
        if (xhr.responseType === 'json') {
          try {
            value = N.parse(body);
          } catch (e) {
            value = null;
          }
        }
        var fixed = { readyState: 4, status: status, statusText: '', responseText: body, response: value };
        N.forEach(N.keys(fixed), function (k) {
          N.defineProperty(xhr, k, { configurable: true, get: function () { return fixed[k]; } });
        });
        xhr.getResponseHeader = function (name) {
          for (var i = 0; i < heads.length; i++)
            if (N.toLowerCase(heads[i][0]) === N.toLowerCase(String(name))) return heads[i][1];
          return null;
        };
        xhr.getAllResponseHeaders = function () {
          return N.join(N.map(heads, function (h) { return N.toLowerCase(h[0]) + ': ' + h[1]; }), '\r\n');
        };
        N.dispatchEvent(xhr, new Event('readystatechange'));
        N.dispatchEvent(xhr, new ProgressEvent(f.abort ? 'error' : 'load'));
        N.dispatchEvent(xhr, new ProgressEvent('loadend'));
      }));
  }

  function installFetch() {
    if (typeof window.fetch !== 'function') return;
    if (!isNativeFn(window.fetch))
      emit('blind-spot', {
        reason: 'wrapped-network',
        kind: 'wrapped-network',
        count: 1,
        detail:
          'window.fetch was already wrapped by another library before reticle loaded; ' +
          'requests are still observed through the wrapper'
      });
    patch(window, 'fetch', fetchWrapper);
  }
  // window.fetch, wrapped: a net.pending before the call, a net.request (or a stream) after it.
  function fetchWrapper(orig) {
    return function fetch(input, init) {
      var call = { meta: null, args: arguments };
      try {
        fetchStart(call, input, init);
      } catch (e) {
        call.meta = null;
      }
      var meta = call.meta;
      var p = meta && meta.fault ? faultedFetch(meta.fault, orig, this, call.args) : N.apply(orig, this, call.args);
      if (!meta) return p;
      try {
        fetchRequestBody(meta, input);
      } catch (e) {
        /* ignore */
      }
      N.then(p, guard('network_observer', function (res) {
          onFetchResponse(meta, res);
        }),
        guard('network_observer', function (err) {
          fetchFailed(meta, err);
        }));
      return p;
    };
  }
  // The record of a fetch about to start (call.meta; none for the bridge) and its net.pending; a
  // request the server can see is marked with this tab's header (call.args then carry it).
  function fetchStart(call, input, init) {
    var url = typeof input === 'string' ? input : input && input.url ? input.url : String(input);
    var method = N.toUpperCase((init && init.method) ||
      (input && typeof input === 'object' && input.method) ||
      'GET');
    try {
      url = new URL(url, location.href).href;
    } catch (e) {
      /* keep raw */
    }
    if (isBridgeUrl(url)) return;
    var id = 'n' + ++netCounter;
    var meta = { id: id, method: method, url: redactUrl(url), t0: N.now(), stack: callerStack() };
    call.meta = meta;
    if (S.captureBodies && init && init.body != null) meta.req = describeReqBody(init.body);
    meta.fault = faultFor(method, url, 'fetch');
    var pend = {
      id: id,
      requestId: id,
      method: method,
      url: meta.url,
      initiator: 'fetch',
      faultId: meta.fault ? meta.fault.id : undefined
    };
    // marked for the server unless it never reaches it (a fault that answers or aborts it); no-cors
    // admits no custom header (the request would fail)
    var marking =
      !(meta.fault && (meta.fault.abort || meta.fault.respond)) &&
      !((init && init.mode === 'no-cors') || (input && typeof input === 'object' && input.mode === 'no-cors')) &&
      markable(url);
    var mark = marking && takeMark();
    if (marking && !mark) pend.serverMarked = true; // no mark left: what the server did stays unknown
    if (mark) {
      try {
        var hs = new Headers(
          (init && init.headers) || (input && typeof input === 'object' && input.headers) || undefined
        );
        N.set(hs, MARK.header, mark[1]);
        if (N.has(hs, 'traceparent')) pend.ownTrace = true;
        else N.set(hs, 'traceparent', traceparent(mark[1]));
        init = N.assign({}, init || {}, { headers: hs });
        call.args = [input, init];
        pend.serverMarked = true;
        pend.serverMark = mark[0];
        meta.marked = true;
      } catch (e) {
        /* an exotic init: the request goes unmarked */
      }
    }
    emit('net.pending', pend);
  }
  // a Request object body: read from a clone
  function fetchRequestBody(meta, input) {
    var method = meta.method;
    if (
      S.captureBodies &&
      !meta.req &&
      input &&
      typeof input === 'object' &&
      typeof input.clone === 'function' &&
      method !== 'GET' &&
      method !== 'HEAD'
    ) {
      meta.reqP = N.then(N.text(N.clone(input)), function (t) {
            return t ? describeReqBody(t) : null;
          },
          function () {
            return null;
          });
    }
  }
  // The failed fetch whose failure the page is handling now: from the rejection until the next task
  // (the page's own .catch and awaits run as microtasks in between), a console error is about it.
  var HANDLING = null;
  function handlingFailure(id) {
    HANDLING = id;
    N.setTimeout(function () {
      if (HANDLING === id) HANDLING = null;
    }, 0);
  }
  function fetchFailed(meta, err) {
    handlingFailure(meta.id);
    var d = {
      id: meta.id,
      requestId: meta.id,
      method: meta.method,
      url: meta.url,
      status: 0,
      ok: false,
      durationMs: N.round(N.now() - meta.t0),
      initiator: 'fetch',
      error: clip(err && err.name === 'AbortError' ? 'aborted' : errMsg(err), 500),
      stack: meta.stack
    };
    if (meta.fault) d.faultId = meta.fault.id;
    d.ms = d.durationMs;
    emit('net.request', withBodyFields(d, meta.req, null));
  }
  // Response headers as {lowercase-name: value}: at most 30, values capped at 256 characters;
  // credentials (set-cookie, authorization, proxy-authorization, any secret-looking name) redacted.
  var HEADERS_MAX = 30;
  var HEADER_VALUE_CAP = 256;
  function headerMap(pairs) {
    var out = {},
      n = 0,
      more = false;
    for (var i = 0; i < pairs.length; i++) {
      var k = N.toLowerCase(String(pairs[i][0] || ''));
      if (!k || k === '__proto__' || hasOwn(out, k)) continue;
      if (n >= HEADERS_MAX) {
        more = true;
        continue;
      }
      n++;
      var v = String(pairs[i][1] == null ? '' : pairs[i][1]);
      out[k] =
        N.test(/^(set-cookie2?|authorization|proxy-authorization|proxy-authenticate)$/, k) || keySensitive(k)
          ? REDACTED
          : clip(scrubText(v), HEADER_VALUE_CAP);
    }
    return { headers: out, truncated: more };
  }
  function withHeaders(d, pairs) {
    try {
      var h = headerMap(pairs);
      d.responseHeaders = h.headers;
      if (h.truncated) d.responseHeadersTruncated = true;
    } catch (e) {
      /* headers unreadable: leave them out */
    }
    return d;
  }
  function fetchHeaderPairs(res) {
    var pairs = [];
    if (res.headers && typeof res.headers.forEach === 'function')
      N.forEach(res.headers, function (v, k) {
        if (pairs.length <= HEADERS_MAX * 2) N.push(pairs, [k, v]);
      });
    return pairs;
  }
  function xhrHeaderPairs(xhr) {
    var raw = N.getAllResponseHeaders(xhr) || '';
    return N.filter(N.map(N.slice(N.split(raw, /\r?\n/), 0, HEADERS_MAX * 2), function (line) {
        var i = N.indexOf(line, ':');
        return i > 0 ? [N.trim(N.slice(line, 0, i)), N.trim(N.slice(line, i + 1))] : null;
      }), Boolean);
  }
  // The net.request record of a completed fetch or XHR; `header` reads a response header.
  function callRecord(meta, url, initiator, status, statusText, header) {
    var ms = N.round(N.now() - meta.t0);
    var ct = '';
    try {
      ct = header('content-type') || '';
    } catch (e) {
      /* opaque, or the request failed */
    }
    return {
      id: meta.id,
      requestId: meta.id,
      method: meta.method,
      url: url,
      status: status,
      ok: status >= 200 && status < 400,
      durationMs: ms,
      ms: ms,
      initiator: initiator,
      statusText: statusText || undefined,
      contentType: ct || undefined,
      faultId: meta.fault ? meta.fault.id : undefined,
      stack: meta.stack
    };
  }
  // A fetch answered: its net.request once its body (and the request's own) has been read.
  function onFetchResponse(meta, res) {
    textWatchAnswered(); // (before the page's own .then: its swap is what this answer carried)
    var d = fetchResponseRecord(meta, res);
    var ct = d.contentType || '';
    var reqDone = meta.reqP ? meta.reqP : N.resolve(meta.req);
    if (N.test(STREAMY, ct) && !res.bodyUsed && watchStream(meta, res, d, ct, reqDone)) return;
    if (!S.captureBodies) {
      emitRequestWhenRead(d, reqDone, null);
      return;
    }
    var reason = fetchNoBodyReason(meta, res, ct);
    var clone = null;
    if (!reason) {
      try {
        clone = N.clone(res);
      } catch (e) {
        reason = 'clone failed';
      }
    }
    if (!clone) {
      emitRequestWhenRead(d, reqDone, { reason: reason });
      return;
    }
    fetchReadBody(d, clone, ct, reqDone);
  }
  function emitRequestWhenRead(d, reqDone, resp) {
    N.then(reqDone, function (rq) {
      emit('net.request', withBodyFields(d, rq, resp));
    });
  }
  // The net.request record of a response: status, headers, opaque, redirected, size.
  function fetchResponseRecord(meta, res) {
    var d = callRecord(meta, meta.url, 'fetch', res.status, res.statusText, function (name) {
      return N.get(res.headers, name);
    });
    withHeaders(d, fetchHeaderPairs(res));
    if (res.type === 'opaque') {
      d.opaque = true;
      d.ok = null;
    }
    if (res.redirected) d.redirected = true;
    var cl = null;
    try {
      cl = N.get(res.headers, 'content-length');
    } catch (e) {
      /* ignore */
    }
    if (cl != null && !isNaN(+cl)) d.responseSize = +cl;
    return d;
  }
  // Why the response's body is not read, or null when it is.
  function fetchNoBodyReason(meta, res, ct) {
    if (N.test(STREAMY, ct)) return 'streaming response';
    if (ct && !N.test(TEXTUAL, ct)) return 'non-text content-type';
    if (res.type === 'opaque' || res.status === 204 || res.status === 304 || meta.method === 'HEAD')
      return 'no body';
    if (res.bodyUsed) return 'body already used';
    return null;
  }
  // Reads at most 256 KiB of the clone within 2 s; the net.request carries what it read.
  function fetchReadBody(d, clone, ct, reqDone) {
    var finished = false;
    var rd = readCapped(clone, 262144);
    var timer = N.setTimeout(function () {
      if (finished) return;
      finished = true;
      N.cancel(rd);
      emitRequestWhenRead(d, reqDone, { reason: 'body read timed out (2 s)' });
    }, 2000);
    N.then(N.all([rd.promise, reqDone]), function (vals) {
        if (finished) return;
        finished = true;
        N.clearTimeout(timer);
        var got = vals[0];
        var r = redactBody(got.text, ct);
        emit(
          'net.request',
          withBodyFields(d, vals[1], {
            body: r.body,
            truncated: r.truncated || !got.complete,
            size: d.responseSize != null ? d.responseSize : got.complete ? r.size : undefined
          })
        );
      },
      function (e) {
        if (finished) return;
        finished = true;
        N.clearTimeout(timer);
        emitRequestWhenRead(d, reqDone, { reason: 'body read failed: ' + clip(errMsg(e), 200) });
      });
  }

  // -- network: streamed fetch responses (event-stream, ndjson, other streams)
  // A clone of the body is read beside the app's copy and split into messages, each a net.stream
  // event shaped like a net.ws frame; the fetch stays pending until the stream ends, and its
  // net.request then carries streamed:true and messageCount.
  var STREAM_MAX_MESSAGES = 500; // messages emitted per stream; the rest are counted and reported
  var STREAM_MAX_PER_SEC = 100; // messages emitted per stream and second
  var STREAM_MESSAGE_SCAN = 65536; // characters of one message kept for redaction; the rest counted
  // bytes read while the page has not read its own copy at all: past this the page's copy would
  // only pile up in memory because of us, so reading stops (streamStopped on the net.request)
  var STREAM_UNREAD_MAX = 8 << 20;
  function streamFormat(ct) {
    if (N.test(/event-stream/i, ct)) return 'sse';
    if (N.test(/(x-ndjson|stream\+json|jsonl|json-seq)/i, ct)) return 'ndjson';
    return 'chunks';
  }
  // Calls `fn` once when the page cancels the body it reads (stream.cancel or reader.cancel), so
  // our copy lets go too and the connection closes as it would without us.
  function onPageCancel(stream, fn) {
    function wrapCancel(obj, orig) {
      N.defineProperty(obj, 'cancel', {
        configurable: true,
        writable: true,
        value: function () {
          try {
            fn();
          } catch (e) {
            /* ignore */
          }
          return N.apply(orig, obj, arguments);
        }
      });
    }
    try {
      var getReader = stream.getReader;
      wrapCancel(stream, stream.cancel);
      N.defineProperty(stream, 'getReader', {
        configurable: true,
        writable: true,
        value: function () {
          var r = N.apply(getReader, stream, arguments);
          try {
            if (r && typeof r.cancel === 'function') wrapCancel(r, r.cancel);
          } catch (e) {
            /* ignore */
          }
          return r;
        }
      });
    } catch (e) {
      /* a frozen stream: our copy then reads to the end */
    }
  }
  // Reads a clone of a streamed fetch response beside the page's copy; false when it cannot.
  // What one stream has seen so far lives in one record, `st`, that the stream* functions share.
  function watchStream(meta, res, d, ct, reqDone) {
    var st = streamOpen(meta, res, d, ct, reqDone);
    if (!st) return false;
    emit('net.stream', {
      direction: 'open',
      transport: 'stream',
      url: meta.url,
      requestId: meta.id,
      status: res.status,
      ok: d.ok,
      contentType: clip(ct, 200),
      format: st.format
    });
    if (res.body) {
      onPageCancel(res.body, function () {
        st.cancelled = true;
        // what the page already read is queued on our copy too: read it first, then let go
        N.setTimeout(function () {
          try {
            if (!st.finished) N.catch(N.cancel(st.reader), function () {});
          } catch (e) {
            /* ignore */
          }
        }, 0);
      });
    }
    streamPump(st);
    return true;
  }
  // The record of one stream with its reader on a clone of the body, or null when there is none.
  function streamOpen(meta, res, d, ct, reqDone) {
    var clone, reader, dec;
    try {
      if (typeof TextDecoder === 'undefined') return null;
      clone = N.clone(res);
      if (!clone.body || typeof clone.body.getReader !== 'function') return null;
      reader = N.getReader(clone.body);
      dec = new TextDecoder();
    } catch (e) {
      return null;
    }
    return {
      meta: meta,
      res: res,
      d: d,
      reqDone: reqDone,
      reader: reader,
      dec: dec,
      format: streamFormat(ct),
      count: 0,
      emitted: 0,
      dropped: 0,
      unreported: 0,
      reportTimer: null,
      held: null, // the newest message the caps dropped: the stream's last one is always sent
      secStart: 0,
      inSec: 0,
      bytes: 0,
      finished: false,
      cancelled: false,
      buf: '',
      lineCut: false,
      lineOver: 0,
      sse: { parts: [], len: 0, kept: 0, event: '', id: '' }
    };
  }
  function streamReport(st) {
    st.reportTimer = null;
    if (!st.unreported) return;
    emit('truncated', {
      what: 'net.stream',
      channel: 'net.stream',
      count: st.unreported,
      dropped: st.unreported,
      reason:
        'caps of ' + STREAM_MAX_MESSAGES + ' messages per stream and ' + STREAM_MAX_PER_SEC + ' per second',
      url: st.meta.url,
      requestId: st.meta.id
    });
    st.unreported = 0;
  }
  function streamMessage(st, text, fullLen, evName, evId) {
    st.count++;
    var t = N.now();
    if (t - st.secStart > 1000) {
      st.secStart = t;
      st.inSec = 0;
    }
    var capped = st.emitted >= STREAM_MAX_MESSAGES || st.inSec >= STREAM_MAX_PER_SEC;
    if (st.held) {
      // the message held back is not the last one after all: it is dropped
      st.dropped++;
      st.unreported++;
      st.held = null;
      if (!st.reportTimer) {
        st.reportTimer = N.setTimeout(function () {
          streamReport(st);
        }, 1000);
      }
    }
    if (capped) {
      st.held = [text, fullLen, evName, evId, st.count];
      return;
    }
    st.inSec++;
    streamSend(st, text, fullLen, evName, evId, st.count, false);
  }
  function streamSend(st, text, fullLen, evName, evId, index, final) {
    st.emitted++;
    var f = frameData(text);
    if (fullLen > text.length) {
      f.size = fullLen;
      f.frameBytes = fullLen;
      if (S.captureBodies) f.dataTruncated = true;
    }
    f.direction = 'in';
    f.transport = 'stream';
    f.url = st.meta.url;
    f.requestId = st.meta.id;
    f.index = index;
    if (evName) f.event = clip(evName, 100);
    if (evId) f.lastEventId = clip(evId, 100);
    if (final) f.final = true;
    emit('net.stream', f);
  }
  function streamSseDispatch(st) {
    var sse = st.sse;
    if (sse.parts.length) {
      var text = N.join(sse.parts, '\n');
      streamMessage(st, N.slice(text, 0, STREAM_MESSAGE_SCAN), sse.len + sse.parts.length - 1, sse.event, sse.id);
    }
    sse.parts = [];
    sse.len = 0;
    sse.kept = 0;
    sse.event = '';
  }
  // One line of an ndjson or event-stream body; `over` counts its characters past the scan cap.
  function streamLine(st, text, over) {
    if (st.format === 'ndjson') {
      if (N.trim(text)) streamMessage(st, text, text.length + over);
      return;
    }
    if (text === '') return streamSseDispatch(st);
    if (N.charAt(text, 0) === ':') return;
    var sse = st.sse;
    var i = N.indexOf(text, ':');
    var field = i < 0 ? text : N.slice(text, 0, i);
    var value = i < 0 ? '' : N.slice(text, i + 1);
    if (N.charAt(value, 0) === ' ') value = N.slice(value, 1);
    if (field === 'data') {
      sse.len += value.length + over;
      if (sse.kept < STREAM_MESSAGE_SCAN) {
        N.push(sse.parts, value);
        sse.kept += value.length + 1;
      }
    } else if (field === 'event') sse.event = value;
    else if (field === 'id' && N.indexOf(value, '\u0000') < 0) sse.id = value;
  }
  function streamFeed(st, chunk, last) {
    if (st.format === 'chunks') {
      if (chunk) streamMessage(st, N.slice(chunk, 0, STREAM_MESSAGE_SCAN), chunk.length);
      return;
    }
    if (st.lineCut) {
      var nl = N.search(chunk, /[\r\n]/);
      if (nl < 0) {
        st.lineOver += chunk.length;
        chunk = '';
      } else {
        st.lineOver += nl;
        chunk = N.slice(chunk, nl);
        st.lineCut = false;
      }
    }
    st.buf += chunk;
    var hold = '';
    if (!last && N.charAt(st.buf, st.buf.length - 1) === '\r') {
      hold = '\r';
      st.buf = N.slice(st.buf, 0, -1);
    }
    var lines = N.split(st.buf, /\r\n|\r|\n/);
    st.buf = N.pop(lines);
    for (var i = 0; i < lines.length; i++) {
      streamLine(st, lines[i], i === 0 ? st.lineOver : 0);
      if (i === 0) st.lineOver = 0;
    }
    if (last) {
      if (st.buf) streamLine(st, st.buf, st.lineOver);
      if (st.format === 'sse') streamSseDispatch(st);
      st.buf = '';
      return;
    }
    if (st.buf.length > STREAM_MESSAGE_SCAN) {
      st.lineOver += st.buf.length - STREAM_MESSAGE_SCAN;
      st.buf = N.slice(st.buf, 0, STREAM_MESSAGE_SCAN);
      st.lineCut = !hold;
    }
    st.buf += hold;
  }
  function streamFinish(st, err) {
    if (st.finished) return;
    st.finished = true;
    var held = st.held;
    if (held && err === 'unread') {
      st.dropped++;
      st.unreported++;
    } else if (held) {
      // the last message past the caps is sent anyway: it is the one that tells how it ended
      streamSend(st, held[0], held[1], held[2], held[3], held[4], true);
    }
    st.held = null;
    if (st.reportTimer) N.clearTimeout(st.reportTimer);
    streamReport(st);
    var d = st.d;
    var end = N.round(N.now() - st.meta.t0);
    d.streamed = true;
    d.messageCount = st.count;
    if (st.dropped) d.messagesDropped = st.dropped;
    d.streamDurationMs = end;
    if (st.cancelled) d.cancelledByPage = true;
    else if (err === 'unread')
      d.streamStopped = 'the page read none of its copy; reading stopped after ' + st.bytes + ' bytes';
    else if (err) d.streamError = clip(err.name === 'AbortError' ? 'aborted' : errMsg(err), 500);
    N.then(st.reqDone, function (rq) {
      emit('net.request', withBodyFields(d, rq, { reason: 'streaming response' }));
    });
  }
  // a message the SDK fails to parse is reported; the stream is still read to its end
  function streamSafeFeed(st, chunk, last) {
    try {
      streamFeed(st, last ? N.decode(st.dec) : N.decode(st.dec, chunk, { stream: true }), last);
    } catch (e) {
      internal('network_observer', e);
    }
  }
  function streamPump(st) {
    N.then(N.read(st.reader), function (r) {
        if (r.done) {
          streamSafeFeed(st, null, true);
          streamFinish(st, null);
          return;
        }
        streamSafeFeed(st, r.value, false);
        st.bytes += (r.value && r.value.byteLength) || 0;
        if (st.bytes > STREAM_UNREAD_MAX && !st.res.bodyUsed) {
          streamFinish(st, 'unread');
          N.catch(N.cancel(st.reader), function () {}); // the page's copy goes on without ours
          return;
        }
        streamPump(st);
      },
      guard('network_observer', function (e) {
        streamFinish(st, e || new Error('stream read failed'));
      }));
  }

  // read at most ~cap characters of a (cloned) response without buffering a huge body
  function readCapped(resp, cap) {
    var reader = null;
    var out = {
      cancel: function () {
        try {
          if (reader) N.cancel(reader);
        } catch (e) {
          /* ignore */
        }
      }
    };
    if (
      !resp.body ||
      typeof resp.body.getReader !== 'function' ||
      typeof TextDecoder === 'undefined'
    ) {
      out.promise = N.then(N.text(resp), function (t) {
        return { text: t, complete: true };
      });
      return out;
    }
    reader = N.getReader(resp.body);
    var dec = new TextDecoder(),
      text = '';
    function pump() {
      return N.then(N.read(reader), function (r) {
        if (r.done) return { text: text + N.decode(dec), complete: true };
        text += N.decode(dec, r.value, { stream: true });
        if (text.length > cap) {
          N.cancel(out);
          return { text: text, complete: false };
        }
        return pump();
      });
    }
    out.promise = pump();
    return out;
  }

  // XMLHttpRequest open and send, wrapped; META holds each instance's method, URL and record.
  function installXHR() {
    var X = window.XMLHttpRequest;
    if (!X || !X.prototype) return;
    var META = new WeakMap();
    patch(X.prototype, 'open', function (orig) {
      return function (method, url) {
        try {
          var u = String(url);
          try {
            u = new URL(u, location.href).href;
          } catch (e) {
            /* keep */
          }
          N.set(META, this, { method: N.toUpperCase(String(method || 'GET')), url: u });
        } catch (e) {
          /* ignore */
        }
        return N.apply(orig, this, arguments);
      };
    });
    // a traceparent the page sets itself (its own OpenTelemetry) is left as it is
    patch(X.prototype, 'setRequestHeader', function (orig) {
      return function (name) {
        try {
          var m = N.get(META, this);
          if (m && N.toLowerCase(String(name)) === 'traceparent') m.ownTrace = true;
        } catch (e) {
          /* ignore */
        }
        return N.apply(orig, this, arguments);
      };
    });
    patch(X.prototype, 'send', function (orig) {
      return function (body) {
        var xhr = this;
        try {
          xhrSendStart(META, xhr, body);
        } catch (e) {
          internal('network_observer', e);
        }
        var mf = N.get(META, xhr);
        if (mf && mf.fault && mf.id) return faultedXhr(mf.fault, xhr, orig, arguments);
        return N.apply(orig, this, arguments);
      };
    });
  }
  // An XHR about to be sent: its record, its mark for the server, its net.pending, its loadend.
  function xhrSendStart(META, xhr, body) {
    var m = N.get(META, xhr);
    if (!m || isBridgeUrl(m.url)) return;
    var id = 'n' + ++netCounter;
    m.id = id;
    m.t0 = N.now();
    m.rurl = redactUrl(m.url);
    m.req = S.captureBodies ? describeReqBody(body) : null;
    m.fault = faultFor(m.method, m.url, 'xhr');
    m.stack = callerStack();
    var xpend = {
      id: id,
      requestId: id,
      method: m.method,
      url: m.rurl,
      initiator: 'xhr',
      faultId: m.fault ? m.fault.id : undefined
    };
    if (!(m.fault && (m.fault.abort || m.fault.respond)) && markable(m.url)) {
      var xmark = takeMark();
      try {
        if (xmark) N.setRequestHeader(xhr, MARK.header, xmark[1]);
        if (xmark && m.ownTrace) xpend.ownTrace = true;
        else if (xmark) N.setRequestHeader(xhr, 'traceparent', traceparent(xmark[1]));
        xpend.serverMarked = true;
        if (xmark) xpend.serverMark = xmark[0];
      } catch (e) {
        /* not opened, or already sent: unmarked */
      }
    }
    emit('net.pending', xpend);
    if (!m.listening) {
      m.listening = true;
      N.addEventListener(xhr, 'loadend',
        guard('network_observer', function () {
          xhrLoadend(META, xhr);
        }));
      // done (4) comes before load, where htmx swaps the answer in; loadend (the net.request) after it
      N.addEventListener(xhr, 'readystatechange',
        guard('network_observer', function () {
          if (xhr.readyState === 4) textWatchAnswered();
        }));
    }
  }
  // The net.request of a finished XHR (once per send).
  function xhrLoadend(META, xhr) {
    var mm = N.get(META, xhr);
    if (!mm || !mm.id) return;
    var d = callRecord(mm, mm.rurl, 'xhr', xhr.status, xhr.statusText, function (name) {
      return N.getResponseHeader(xhr, name);
    });
    if (xhr.status) withHeaders(d, xhrHeaderPairs(xhr));
    var ct = d.contentType || '';
    if (xhr.status === 0) d.error = 'network error, abort or timeout';
    var resp = S.captureBodies ? xhrResponseBody(xhr, ct) : null;
    emit('net.request', withBodyFields(d, mm.req, resp));
    mm.id = null;
  }
  function xhrResponseBody(xhr, ct) {
    try {
      if (xhr.responseType === '' || xhr.responseType === 'text') {
        if (N.test(STREAMY, ct)) return { reason: 'streaming response' };
        if (ct && !N.test(TEXTUAL, ct)) return { reason: 'non-text content-type' };
        var r = redactBody(xhr.responseText || '', ct);
        return { body: r.body, truncated: r.truncated, size: r.size };
      }
      if (xhr.responseType === 'json') {
        var r2 = redactBody(N.stringify(xhr.response), 'application/json');
        return { body: r2.body, truncated: r2.truncated, size: r2.size };
      }
      return { reason: 'responseType ' + xhr.responseType };
    } catch (e) {
      return { reason: 'body read failed' };
    }
  }

  function installBeacon() {
    if (!navigator.sendBeacon) return;
    patch(navigator, 'sendBeacon', function (orig) {
      return function (url, data) {
        var queued = N.apply(orig, this, arguments);
        try {
          var id = 'n' + ++netCounter;
          var u = String(url);
          try {
            u = new URL(u, location.href).href;
          } catch (e) {
            /* keep */
          }
          var d = {
            id: id,
            requestId: id,
            method: 'POST',
            url: redactUrl(u),
            status: 0,
            ok: !!queued,
            queued: !!queued,
            durationMs: 0,
            ms: 0,
            initiator: 'beacon',
            oneWay: true,
            stack: callerStack()
          };
          emit(
            'net.request',
            withBodyFields(d, S.captureBodies ? describeReqBody(data) : null, null)
          );
        } catch (e) {
          /* ignore */
        }
        return queued;
      };
    });
  }

  function frameData(data) {
    var d = {};
    if (typeof data === 'string') {
      d.size = data.length;
      d.frameBytes = data.length;
      if (S.captureBodies) {
        var r = redactBody(data, '');
        d.data = r.body.length > FRAME_DATA_CAP ? N.slice(r.body, 0, FRAME_DATA_CAP) : r.body;
        if (r.truncated || r.body.length > FRAME_DATA_CAP) d.dataTruncated = true;
      }
    } else {
      d.frameType = 'binary';
      try {
        d.size = data.byteLength != null ? data.byteLength : data.size || 0;
      } catch (e) {
        d.size = 0;
      }
      d.frameBytes = d.size;
    }
    return d;
  }
  function frameEvent(data, direction, transport, url) {
    var d = frameData(data);
    d.direction = direction;
    d.transport = transport;
    d.url = url;
    return d;
  }
  // Put W in the place of window[name] (its Native): the same prototype (instanceof holds) and
  // ready-state constants; put back at teardown unless someone replaced it since.
  function swapConstructor(name, Native, W, constants) {
    W.prototype = Native.prototype;
    N.forEach(constants, function (k) {
      try {
        N.defineProperty(W, k, { value: Native[k] });
      } catch (e) {
        /* ignore */
      }
    });
    try {
      N.defineProperty(W, '__reticleWrapped', { value: true });
    } catch (e) {
      /* ignore */
    }
    window[name] = W;
    N.push(S.teardowns, function () {
      if (window[name] === W) window[name] = Native;
    });
  }
  function installWebSocket() {
    var Native = N.WebSocket;
    if (!Native) return;
    var allow = rateCap('net.ws', 100);
    var W = function WebSocket(url, protocols) {
      var wf = null;
      try {
        wf = faultFor('GET', new URL(String(url), location.href).href, 'websocket');
      } catch (e) {
        wf = null;
      }
      var ws;
      if (wf && wf.abort) {
        // dropped on purpose (reticle_fault): the handshake goes to a daemon path that refuses it,
        // never to the app's server, and the page sees the failure a real drop gives
        var refuse = new URL(S.url);
        refuse.pathname = '/reticle-fault';
        refuse.search = '';
        ws = new Native(refuse.href);
        var shown = String(url);
        N.defineProperty(ws, 'url', { configurable: true, get: function () { return shown; } });
      } else ws = arguments.length > 1 ? new Native(url, protocols) : new Native(url);
      try {
        var u = redactUrl(ws.url || String(url));
        emit('net.ws', { direction: 'open', transport: 'ws', url: u, faultId: wf ? wf.id : undefined });
        N.addEventListener(ws, 'message', function (e) {
          try {
            if (allow()) {
              var d = frameEvent(e.data, 'in', 'ws', u);
              emit('net.ws', d);
            }
          } catch (x) {
            /* ignore */
          }
        });
        N.addEventListener(ws, 'close', function (e) {
          try {
            emit('net.ws', {
              direction: 'close',
              transport: 'ws',
              url: u,
              code: e.code,
              reason: clip(e.reason, 200),
              clean: e.wasClean,
              faultId: wf ? wf.id : undefined
            });
          } catch (x) {
            /* ignore */
          }
        });
        N.addEventListener(ws, 'error', function () {
          try {
            emit('net.ws', { direction: 'error', transport: 'ws', url: u, faultId: wf ? wf.id : undefined });
          } catch (x) {
            /* ignore */
          }
        });
        var send = ws.send;
        ws.send = function (data) {
          try {
            if (allow()) {
              var d = frameEvent(data, 'out', 'ws', u);
              emit('net.ws', d);
            }
          } catch (x) {
            /* ignore */
          }
          return N.apply(send, ws, arguments);
        };
      } catch (e) {
        internal('network_observer', e);
      }
      return ws;
    };
    swapConstructor('WebSocket', Native, W, ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']);
  }
  function installEventSource() {
    var Native = window.EventSource;
    if (!Native) return;
    var allow = rateCap('net.sse', 100);
    var W = function EventSource(url, init) {
      var es = new Native(url, init);
      try {
        var u = redactUrl(es.url || String(url));
        emit('net.sse', { direction: 'open', transport: 'sse', url: u });
        N.addEventListener(es, 'message', function (e) {
          try {
            if (allow()) {
              var d = frameEvent(e.data, 'in', 'sse', u);
              if (e.lastEventId) d.lastEventId = clip(e.lastEventId, 100);
              emit('net.sse', d);
            }
          } catch (x) {
            /* ignore */
          }
        });
        N.addEventListener(es, 'error', function () {
          try {
            emit('net.sse', {
              direction: es.readyState === 2 ? 'close' : 'error',
              transport: 'sse',
              url: u,
              readyState: es.readyState
            });
          } catch (x) {
            /* ignore */
          }
        });
        var close = es.close;
        es.close = function () {
          try {
            emit('net.sse', { direction: 'close', transport: 'sse', url: u, byClient: true });
          } catch (x) {
            /* ignore */
          }
          return N.apply(close, es, arguments);
        };
      } catch (e) {
        internal('network_observer', e);
      }
      return es;
    };
    swapConstructor('EventSource', Native, W, ['CONNECTING', 'OPEN', 'CLOSED']);
  }

