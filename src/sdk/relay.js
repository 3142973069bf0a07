(function () {
  if (window.top !== window || !/^https?:$/.test(location.protocol)) return;
  var BASE = /*__BASE__*/'', NONCE = /*__NONCE__*/'', ask = globalThis[/*__BINDING__*/''];
  if (typeof ask !== 'function') return;
  var channel = new MessageChannel(), port = channel.port1, socks = {}, waiting = [];
  function post(m) { try { port.postMessage(m); } catch (e) { /* the page went away */ } }
  function watch(id, ws) {
    if (ws.bufferedAmount > 0) setTimeout(function () { watch(id, ws); }, 25);
    post({op: 'buffered', id: id, n: ws.bufferedAmount});
  }
  globalThis.__reticleRelayOpen = function (ticket) {
    var id = waiting.shift(), ws;
    if (id == null) return;
    try { ws = new WebSocket(BASE + encodeURIComponent(ticket)); } catch (e) {
      post({op: 'close', id: id, code: 1006, reason: ''});
      return;
    }
    socks[id] = ws;
    ws.onopen = function () { post({op: 'open', id: id}); };
    ws.onmessage = function (m) { post({op: 'message', id: id, data: m.data}); };
    ws.onclose = function (e) { delete socks[id]; post({op: 'close', id: id, code: e.code, reason: e.reason}); };
  };
  port.onmessage = function (e) {
    var m = e.data || {}, ws = socks[m.id];
    if (m.op === 'open' && typeof m.id === 'number' && waiting.length < 8) {
      var id = m.id;
      waiting.push(id);
      ask(String(id));
      setTimeout(function () {  // no ticket came (the daemon went away): the SDK retries as after a failure
        var at = waiting.indexOf(id);
        if (at >= 0) {
          waiting.splice(at, 1);
          post({op: 'close', id: id, code: 1006, reason: ''});
        }
      }, 5000);
    } else if (m.op === 'send' && ws && ws.readyState === 1) {
      ws.send(String(m.data));
      if (ws.bufferedAmount > 0) watch(m.id, ws);
    } else if (m.op === 'close' && ws) {
      try { ws.close(m.code === 1000 ? 1000 : undefined); } catch (x) { ws.close(); }
    }
  };
  window.postMessage({reticleRelay: NONCE}, '*', [channel.port2]);
})();
