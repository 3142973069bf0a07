  // == Section: observers == what every observer uses: patch, listen, rate caps
  // provides: patch, listen, rateCap
  // uses: N (01), S (04), emit (04), guard (04)
  // ---- observers -----------------------------------------------------------------------------
  // patch(obj, key, makeWrapper): installs a wrapper and registers a teardown that restores the
  // original only if the slot still holds our wrapper.
  function patch(obj, key, make) {
    var orig = obj[key];
    if (typeof orig !== 'function' || orig.__reticleWrapped) return null;
    var w = make(orig);
    try {
      N.defineProperty(w, '__reticleWrapped', { value: true });
    } catch (e) {
      /* frozen fn */
    }
    try {
      N.defineProperty(w, 'name', { value: orig.name, configurable: true });
    } catch (e) {
      /* ignore */
    }
    obj[key] = w;
    N.push(S.teardowns, function () {
      if (obj[key] === w) obj[key] = orig;
    });
    return orig;
  }
  function listen(target, type, fn, opts) {
    var g = guard('listener:' + type, fn);
    N.addEventListener(target, type, g, opts);
    N.push(S.teardowns, function () {
      N.removeEventListener(target, type, g, opts);
    });
  }
  // per-channel rate cap; overflow is reported as a truncated event once per window
  function rateCap(channel, perSec) {
    var win = 0,
      n = 0,
      dropped = 0;
    return function () {
      var t = N.now();
      if (t - win > 1000) {
        if (dropped)
          emit('truncated', {
            what: channel,
            count: dropped,
            reason: 'rate cap of ' + perSec + ' events/s',
            channel: channel,
            dropped: dropped
          });
        win = t;
        n = 0;
        dropped = 0;
      }
      if (n++ < perSec) return true;
      dropped++;
      return false;
    };
  }

