  // == Section: stores == app stores, signals, describe, capabilities
  // provides: STORES, shallowDiff, readStore, registerStore, storeListener, storeWithGetState,
  //   storeFromGetter, pushStore, canonicalIndex, walkPath, stateRead, stateAll, statePath, signal,
  //   uniqPush, describeContract, capabilities
  // uses: N (01), REDACTED (01), clip (03), errMsg (03), hasOwn (03), isObj (03), keySensitive (03),
  //   sanitize (03), warn (03), S (04), emit (04), internal (04), sendHello (05), isIgnored (06),
  //   TOASTS (13), declareToasts (13)
  // ---- stores and signals --------------------------------------------------------------------
  var STORES = {}; // name -> {read(), unsub?, last, kind}
  function shallowDiff(name, prev, next) {
    var changes = [];
    if (!isObj(prev) || !isObj(next) || N.isArray(prev) !== N.isArray(next)) {
      if (!N.is(prev, next)) N.push(changes, { path: '', from: prev, to: next });
    } else {
      var keys = {},
        k;
      for (k in prev) if (hasOwn(prev, k)) keys[k] = 1;
      for (k in next) if (hasOwn(next, k)) keys[k] = 1;
      for (k in keys) {
        if (typeof prev[k] === 'function' && typeof next[k] === 'function') continue;
        if (!N.is(prev[k], next[k])) N.push(changes, { path: k, from: prev[k], to: next[k] });
      }
    }
    var cap = 20;
    for (var i = 0; i < changes.length && i < cap; i++) {
      var c = changes[i];
      var from = sanitize(c.from, { depth: 3, items: 20, str: 500 });
      var to = sanitize(c.to, { depth: 3, items: 20, str: 500 });
      if (keySensitive(c.path)) {
        from = from == null ? from : REDACTED;
        to = to == null ? to : REDACTED;
      }
      emit('state.change', {
        store: name,
        name: name,
        path: c.path,
        from: from,
        to: to,
        value: to,
        old: from
      });
    }
    if (changes.length > cap)
      emit('truncated', {
        what: 'state.change',
        count: changes.length - cap,
        reason: 'more than ' + cap + ' top-level keys changed at once in store ' + name,
        channel: 'state',
        dropped: changes.length - cap
      });
  }
  function readStore(name) {
    var st = STORES[name];
    if (!st) return undefined;
    return N.read(st);
  }
  function registerStore(name, store, subscribe) {
    try {
      name = String(name);
      if (!name) {
        warn('registerStore needs a name');
        return false;
      }
      if (STORES[name] && STORES[name].unsub) {
        try {
          STORES[name].unsub();
        } catch (e) {
          /* ignore */
        }
      }
      var entry = { kind: 'unknown', last: undefined };
      if (
        store &&
        (typeof store === 'object' || typeof store === 'function') &&
        typeof store.getState === 'function'
      ) {
        storeWithGetState(name, entry, store, subscribe);
      } else if (typeof store === 'function') {
        storeFromGetter(name, entry, store, subscribe);
      } else if (isObj(store)) {
        entry.kind = 'static';
        entry.read = function () {
          return store;
        };
      } else {
        warn(
          "registerStore('" +
            name +
            "'): unsupported store shape; pass a zustand/redux store or {getState, subscribe}"
        );
        return false;
      }
      STORES[name] = entry;
      return true;
    } catch (e) {
      internal('store_adapter', e);
      return false;
    }
  }
  // The listener a store calls on change: it reads the new value and reports what changed.
  function storeListener(name, entry) {
    return function () {
      try {
        var nx = N.read(entry);
        var pv = entry.last;
        entry.last = nx;
        shallowDiff(name, pv, nx);
      } catch (e) {
        internal('store_adapter', e);
      }
    };
  }
  // A zustand/redux-like store: {getState, subscribe?}.
  function storeWithGetState(name, entry, store, subscribe) {
    entry.kind = typeof store.subscribe === 'function' ? 'subscribable' : 'getter';
    entry.read = function () {
      return store.getState();
    };
    var sub = typeof store.subscribe === 'function' ? store.subscribe : subscribe;
    if (!sub) return;
    entry.last = store.getState();
    var u = N.call(sub, store, storeListener(name, entry));
    entry.unsub =
      typeof u === 'function'
        ? u
        : u && typeof u.unsubscribe === 'function'
          ? function () {
              u.unsubscribe();
            }
          : null;
  }
  // A bare getter, watched only when a subscribe function comes with it.
  function storeFromGetter(name, entry, store, subscribe) {
    entry.kind = 'getter';
    entry.read = function () {
      return store();
    };
    if (typeof subscribe === 'function') {
      entry.last = store();
      var u2 = subscribe(storeListener(name, entry));
      entry.unsub = typeof u2 === 'function' ? u2 : null;
    } else
      warn(
        "store '" +
          name +
          "' is a bare getter: reads work, but changes are not watched " +
          '(pass a subscribe function or a {getState, subscribe} store)'
      );
  }
  function pushStore(name, value) {
    try {
      name = String(name);
      var st = STORES[name];
      if (!st || st.kind !== 'pushed') {
        if (st && st.unsub) {
          try {
            st.unsub();
          } catch (e) {
            /* ignore */
          }
        }
        st = STORES[name] = { kind: 'pushed', last: undefined, read: null };
        st.read = function () {
          return st.last;
        };
        var first = true;
      }
      var prev = st.last;
      st.last = value;
      if (!first) shallowDiff(name, prev, value);
      else
        emit('state.change', {
          store: name,
          name: name,
          path: '',
          initial: true,
          to: sanitize(value, { depth: 2, items: 20, str: 500 }),
          value: sanitize(value, { depth: 2, items: 20, str: 500 })
        });
    } catch (e) {
      internal('store_adapter', e);
    }
  }
  function canonicalIndex(seg) {
    return N.test(/^(0|[1-9]\d*)$/, seg);
  }
  function walkPath(root, path) {
    var segs = path === '' || path == null ? [] : N.split(String(path), '.');
    var cur = root;
    for (var i = 0; i < segs.length; i++) {
      var s = segs[i];
      if ((N.isArray(cur) || typeof cur === 'string') && s === 'length') {
        cur = cur.length;
        continue;
      }
      if (N.isArray(cur)) {
        if (canonicalIndex(s) && +s < cur.length) {
          cur = cur[+s];
          continue;
        }
        return {
          found: false,
          at: N.join(N.slice(segs, 0, i), '.'),
          keys: cur.length ? ['0..' + (cur.length - 1), 'length'] : ['length']
        };
      }
      if (cur instanceof Map) {
        if (N.has(cur, s)) {
          cur = N.get(cur, s);
          continue;
        }
        return {
          found: false,
          at: N.join(N.slice(segs, 0, i), '.'),
          keys: N.map(N.arrayFrom(N.invoke(cur, 'keys')), String)
        };
      }
      if (isObj(cur) && hasOwn(cur, s)) {
        cur = cur[s];
        continue;
      }
      return {
        found: false,
        at: N.join(N.slice(segs, 0, i), '.'),
        keys: isObj(cur) ? N.keys(cur) : [],
        typeAt: cur === null ? 'null' : typeof cur
      };
    }
    return { found: true, value: cur };
  }
  // What the registered stores hold: all of them collapsed, or one value by store and path.
  function stateRead(args) {
    var names = N.keys(STORES);
    if (args.store == null && args.path == null) return stateAll(args, names);
    var storeName = args.store;
    if (storeName == null) {
      // path without store: pick the single store exposing it
      var having = N.filter(names, function (n) {
        try {
          return walkPath(readStore(n), args.path).found;
        } catch (e) {
          return false;
        }
      });
      if (having.length !== 1) {
        return {
          store: null,
          path: args.path,
          found: false,
          value: null,
          storeNames: names,
          candidates: having,
          error: having.length
            ? 'path exists in several stores; name one with store'
            : 'no registered store has this path'
        };
      }
      storeName = having[0];
    }
    if (!STORES[storeName])
      return {
        store: storeName,
        path: args.path || '',
        found: false,
        value: null,
        storeMissing: true,
        storeNames: names,
        availableKeys: names
      };
    return statePath(args, storeName, names);
  }
  // Every store, collapsed to args.depth (1 unless told).
  function stateAll(args, names) {
    var depth = args.depth == null ? 1 : N.max(0, N.min(8, Number(args.depth) || 0));
    var out = {},
      trunc = {};
    N.forEach(names, function (n) {
      try {
        var rep = {};
        out[n] = sanitize(readStore(n), { depth: depth, items: 200, report: rep });
        if (rep.cut) trunc[n] = { truncatedValues: rep.cut };
      } catch (e) {
        out[n] = '[read failed: ' + clip(errMsg(e), 200) + ']';
      }
    });
    var res = { stores: out, storeNames: names };
    if (N.keys(trunc).length) {
      res.truncation = trunc;
      res.truncation.note =
        'stores collapsed to depth ' + depth + '; read one with store+path for the full value';
    }
    if (!names.length)
      res.note =
        'no stores registered; call reticle.registerStore(name, store) or reticle.pushStore(name, value) in the app';
    return res;
  }
  // One store's value at args.path, or where the path stopped and the keys found there.
  function statePath(args, storeName, names) {
    var raw;
    try {
      raw = readStore(storeName);
    } catch (e) {
      throw new Error("reading store '" + storeName + "' failed: " + errMsg(e));
    }
    var w = walkPath(raw, args.path);
    var r2 = { store: storeName, path: args.path || '', found: w.found, storeNames: names };
    if (w.found) {
      var rep2 = {};
      var d2 = args.depth == null ? 8 : N.max(0, N.min(12, Number(args.depth) || 0));
      r2.value = sanitize(w.value, { depth: d2, items: 200, report: rep2 });
      var segs = N.split(String(args.path || ''), '.');
      if (keySensitive(segs[segs.length - 1]) && w.value != null && w.value !== '')
        r2.value = REDACTED;
      if (rep2.cut)
        r2.truncation = {
          truncatedValues: rep2.cut,
          note: 'value capped at depth ' + d2 + ' / 200 items'
        };
    } else {
      r2.value = null;
      r2.stoppedAt = w.at;
      r2.availableKeys = N.slice(w.keys, 0, 50);
      if (w.keys.length > 50) r2.totalKeys = w.keys.length;
      if (w.typeAt) r2.typeAt = w.typeAt;
    }
    return r2;
  }
  function signal(name, data) {
    try {
      name = String(name);
      S.signalsSeen[name] = 1;
      emit('signal', {
        name: name,
        data: data === undefined ? {} : sanitize(data, { depth: 6, items: 100, str: 4000 })
      });
    } catch (e) {
      internal('signal', e);
    }
  }
  function uniqPush(arr, vals) {
    N.forEach(N.isArray(vals) ? vals : [], function (v) {
      if (typeof v === 'string' && N.indexOf(arr, v) < 0) N.push(arr, v);
    });
  }
  function describeContract(c) {
    try {
      c = c || {};
      uniqPush(S.caps.testids, c.testids);
      uniqPush(S.caps.signals, c.signals);
      uniqPush(S.caps.stores, c.stores);
      declareToasts(c.toasts);
      N.forEach(N.isArray(c.flows) ? c.flows : [], function (f) {
        if (!f || typeof f.name !== 'string') return;
        var i;
        for (i = 0; i < S.caps.flows.length; i++) if (S.caps.flows[i].name === f.name) break;
        S.caps.flows[i] = {
          name: f.name,
          steps: N.isArray(f.steps) ? N.slice(f.steps, 0, 100) : []
        };
      });
      S.hasCaps = true;
      sendHello();
    } catch (e) {
      internal('describe', e);
    }
  }
  function capabilities() {
    var found = [];
    try {
      var all = N.querySelectorAll(document, '[data-testid]');
      for (var i = 0; i < all.length && found.length < 500; i++) {
        var t = N.getAttribute(all[i], 'data-testid');
        if (t && N.indexOf(found, t) < 0 && !isIgnored(all[i])) N.push(found, t);
      }
    } catch (e) {
      /* ignore */
    }
    var testids = N.slice(S.caps.testids);
    uniqPush(testids, found);
    var signals = N.slice(S.caps.signals);
    uniqPush(signals, N.keys(S.signalsSeen));
    var stores = N.slice(S.caps.stores);
    uniqPush(stores, N.keys(STORES));
    return {
      testids: testids,
      declaredTestids: N.slice(S.caps.testids),
      discoveredTestids: found,
      signals: signals,
      stores: stores,
      flows: N.slice(S.caps.flows),
      toasts: { error: N.slice(TOASTS.error), info: N.slice(TOASTS.info) },
      source: 'live'
    };
  }

