  // == Section: relay == a device's bridge: the relay's MessagePort
  // provides: relaySockets
  // uses: CFG (01), N (01)
  // ---- a device's bridge: the relay's MessagePort, never a socket of this world ---------------
  // In a device, the bridge socket lives in the relay's isolated world; this world only holds the
  // port the relay hands over (matched by the nonce), so no page script can read its ticket.
  // Everything it does with the port and its messages goes through natives captured here, before
  // any page script runs: a page that patches MessagePort or MessageEvent never holds the port.
  function relaySockets(nonce) {
    var P = window.MessagePort && MessagePort.prototype,
      E = window.MessageEvent && MessageEvent.prototype,
      apply = Reflect.apply,
      getData = N.getOwnPropertyDescriptor(E, 'data').get,
      getPorts = N.getOwnPropertyDescriptor(E, 'ports').get,
      stopNow = Event.prototype.stopImmediatePropagation,
      postPort = P.postMessage,
      setOnMessage = N.getOwnPropertyDescriptor(P, 'onmessage').set;
    function post(m) {
      apply(postPort, port, [m]);
    }
    var port = null,
      queued = [],
      socks = {},
      nextId = 1;
    function onPort(m) {
      var d = apply(getData, m, []) || {},
        s = socks[d.id];
      if (!s) return;
      if (d.op === 'open' && s.readyState === 0) {
        s.readyState = 1;
        if (s.onopen) s.onopen({});
      } else if (d.op === 'message' && s.readyState === 1) {
        if (s.onmessage) s.onmessage({ data: d.data });
      } else if (d.op === 'buffered') {
        s.bufferedAmount = Number(d.n) || 0;
      } else if (d.op === 'close') {
        delete socks[d.id];
        s.readyState = 3;
        if (s.onclose) s.onclose({ code: d.code, reason: d.reason || '' });
      }
    }
    N.addEventListener(window, 'message',
      function (m) {
        var d = apply(getData, m, []);
        if (port || !d || typeof d !== 'object' || d.reticleRelay !== nonce) return;
        var ports = apply(getPorts, m, []);
        if (!ports || !ports.length) return;
        apply(stopNow, m, []);
        port = ports[0];
        apply(setOnMessage, port, [onPort]);
        for (var i = 0; i < queued.length; i++) post({ op: 'open', id: queued[i] });
        queued = [];
      },
      true);
    return function (url) {
      var id = nextId++;
      var s = { url: url, readyState: 0, bufferedAmount: 0, onopen: null, onmessage: null, onclose: null };
      s.send = function (data) {
        if (s.readyState !== 1 || !port) throw new Error('not open');
        post({ op: 'send', id: id, data: String(data) });
      };
      s.close = function (code) {
        if (s.readyState >= 2) return;
        s.readyState = 2;
        if (port) post({ op: 'close', id: id, code: code });
      };
      socks[id] = s;
      if (port) post({ op: 'open', id: id });
      else N.push(queued, id);
      return s;
    };
  }
  if (CFG.device && typeof CFG.relay === 'string') N.BridgeSocket = relaySockets(CFG.relay);

