  // == Section: storage == localStorage, sessionStorage, cookies
  // provides: storageAreaOf, storageValue, storageChanged, storageHeld, installStorage, storageClearWrapper,
  //   installCookieWatch, cookiesObj, storageObj, storageRead
  // uses: N (01), REDACTED (01), STORAGE_MUTE (03), clip (03), hasOwn (03), isObj (03), keySensitive (03),
  //   sanitize (03), scrubText (03), S (04), emit (04), MARK (05), listen (11), patch (11)
  // -- storage
  function storageAreaOf(st) {
    try {
      return st === window.sessionStorage ? 'session' : 'local';
    } catch (e) {
      return 'local';
    }
  }
  function storageValue(k, v) {
    return v == null ? undefined : keySensitive(k) ? REDACTED : clip(scrubText(String(v)), 500);
  }
  function storageChanged(area, k, from, to) {
    var d = { area: area, key: clip(k, 200), from: storageValue(k, from), to: storageValue(k, to) };
    d.old = d.from;
    d['new'] = d.to;
    emit('storage.change', d);
  }
  // what key k held before a write we report (null when muted: our own keys, our own writes)
  function storageHeld(store, k, mute) {
    if (mute) return null;
    try {
      return N.getItem(store, k);
    } catch (e) {
      return null;
    }
  }
  function installStorage() {
    var SP = window.Storage && window.Storage.prototype;
    if (!SP) return;
    patch(SP, 'setItem', function (orig) {
      return function (k, v) {
        var mute = STORAGE_MUTE || N.test(/^__reticle/, String(k));
        var before = storageHeld(this, k, mute);
        var r = N.apply(orig, this, arguments);
        if (!mute) {
          try {
            var now2 = N.getItem(this, k);
            if (now2 !== before) storageChanged(storageAreaOf(this), String(k), before, now2);
          } catch (e) {
            /* ignore */
          }
        }
        return r;
      };
    });
    patch(SP, 'removeItem', function (orig) {
      return function (k) {
        var mute = STORAGE_MUTE || N.test(/^__reticle/, String(k));
        var before = storageHeld(this, k, mute);
        var r = N.apply(orig, this, arguments);
        if (!mute && before !== null) storageChanged(storageAreaOf(this), String(k), before, null);
        return r;
      };
    });
    patch(SP, 'clear', storageClearWrapper);
    listen(window, 'storage', function (e) {
      if (!e.key || N.test(/^__reticle/, e.key)) return;
      var d = {
        area: e.storageArea === window.sessionStorage ? 'session' : 'local',
        key: e.key,
        from: storageValue(e.key, e.oldValue),
        to: storageValue(e.key, e.newValue),
        otherTab: true
      };
      d.old = d.from;
      d['new'] = d.to;
      emit('storage.change', d);
    });
    installCookieWatch();
  }
  // Storage.prototype.clear, wrapped: one storage.change per key it removed (50 at most).
  function storageClearWrapper(orig) {
    return function () {
      var snap = [];
      try {
        for (var i = 0; i < this.length; i++) {
          var k = N.invoke(this, 'key', i);
          if (!N.test(/^__reticle/, k)) N.push(snap, [k, N.getItem(this, k)]);
        }
      } catch (e) {
        /* ignore */
      }
      var r = N.apply(orig, this, arguments);
      var area = storageAreaOf(this);
      N.forEach(N.slice(snap, 0, 50), function (kv) {
        storageChanged(area, kv[0], kv[1], null);
      });
      if (snap.length > 50)
        emit('truncated', {
          what: 'storage.change',
          count: snap.length - 50,
          reason: 'clear() removed more than 50 keys',
          channel: 'storage',
          dropped: snap.length - 50
        });
      return r;
    };
  }
  // cookies written through document.cookie
  function installCookieWatch() {
    try {
      var desc = N.descOf(N.Document.prototype, 'cookie');
      if (!desc || !desc.set || !desc.get || !desc.configurable) return;
      var cookieMap = function () {
        var o = {};
        N.forEach(N.split(String(N.call(desc.get, document) || ''), /;\s*/), function (p) {
            if (!p) return;
            var i = N.indexOf(p, '=');
            o[i < 0 ? p : N.slice(p, 0, i)] = i < 0 ? '' : N.slice(p, i + 1);
          });
        return o;
      };
      N.defineProperty(document, 'cookie', {
        configurable: true,
        enumerable: true,
        get: function () {
          return N.call(desc.get, this);
        },
        set: function (v) {
          var before = null;
          try {
            before = cookieMap();
          } catch (e) {
            /* ignore */
          }
          N.call(desc.set, this, v);
          try {
            var k = N.split(String(v), ';')[0];
            var i = N.indexOf(k, '=');
            var key = N.trim(i < 0 ? k : N.slice(k, 0, i));
            var after = cookieMap();
            if (before && before[key] !== after[key]) storageChanged('cookie', key, before[key], after[key]);
          } catch (e) {
            /* ignore */
          }
        }
      });
      N.push(S.teardowns, function () {
        try {
          delete document.cookie;
        } catch (e) {
          /* ignore */
        }
      });
    } catch (e) {
      /* cookie patch is optional */
    }
  }
  function cookiesObj() {
    var o = {};
    try {
      N.forEach(N.split(String(document.cookie || ''), /;\s*/), function (p) {
          if (!p) return;
          var i = N.indexOf(p, '=');
          var k = i < 0 ? p : N.slice(p, 0, i);
          var v = i < 0 ? '' : N.slice(p, i + 1);
          if (k === MARK.cookie) return; // our own (Server truth), not the app's
          try {
            v = decodeURIComponent(v);
          } catch (e) {
            /* keep raw */
          }
          o[k] = keySensitive(k) ? REDACTED : clip(scrubText(v), 2000);
        });
    } catch (e) {
      /* ignore */
    }
    return o;
  }
  function storageObj(st) {
    var o = {};
    try {
      for (var i = 0; i < st.length && i < 500; i++) {
        var k = N.invoke(st, 'key', i);
        if (N.test(/^__reticle/, k)) continue;
        var v = N.getItem(st, k);
        if (keySensitive(k)) {
          o[k] = REDACTED;
          continue;
        }
        var parsed;
        try {
          parsed = N.parse(v);
        } catch (e) {
          parsed = undefined;
        }
        o[k] =
          parsed !== undefined && isObj(parsed)
            ? sanitize(parsed, { depth: 6, str: 2000 })
            : clip(scrubText(v), 4000);
      }
    } catch (e) {
      /* storage blocked */
    }
    return o;
  }
  function storageRead(args) {
    var area = args.area ? N.toLowerCase(String(args.area)) : null;
    if (area === 'cookie') area = 'cookies';
    if (area === 'localstorage') area = 'local';
    if (area === 'sessionstorage') area = 'session';
    if (area && area !== 'local' && area !== 'session' && area !== 'cookies')
      throw new Error(
        "storage area must be local, session or cookies (got '" + clip(args.area, 40) + "')"
      );
    var get = {
      local: function () {
        try {
          return storageObj(window.localStorage);
        } catch (e) {
          return {};
        }
      },
      session: function () {
        try {
          return storageObj(window.sessionStorage);
        } catch (e) {
          return {};
        }
      },
      cookies: cookiesObj
    };
    if (args.key != null) {
      var areas = area ? [area] : ['local', 'session', 'cookies'];
      for (var i = 0; i < areas.length; i++) {
        var m = get[areas[i]]();
        if (hasOwn(m, args.key))
          return { area: areas[i], key: args.key, found: true, value: m[args.key] };
      }
      return {
        area: area,
        key: args.key,
        found: false,
        value: null,
        availableKeys: N.reduce(areas, function (acc, a) {
          return N.concat(acc, N.map(N.slice(N.keys(get[a]()), 0, 50), function (k) {
                return a + ':' + k;
              }));
        }, [])
      };
    }
    if (area) {
      var r = {};
      r[area] = get[area]();
      r.area = area;
      return r;
    }
    return { local: get.local(), session: get.session(), cookies: get.cookies() };
  }

