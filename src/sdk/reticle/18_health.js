  // == Section: health == focus, page health, dialogs, cross-origin frames
  // provides: installFocus, longTasks, emitHealth, dialogSeen, installDialogs, wrapDialogFunction,
  //   unloadPrevented, unloadReported, installBeforeunloadListeners, installOnBeforeunload, installHealth,
  //   frameShown, checkFrames
  // uses: N (01), clip (03), redactUrl (03), S (04), emit (04), flush (04), guard (04), retryNow (05),
  //   isIgnored (06), refFor (06), label (07), styleOf (07), listen (11)
  // -- focus
  function installFocus() {
    listen(
      document,
      'focusin',
      function (e) {
        var t = e.target;
        if (!t || t.nodeType !== 1 || isIgnored(t)) return;
        var d = { to: label(t), toRef: refFor(t), toBody: false };
        if (e.relatedTarget && e.relatedTarget.nodeType === 1) {
          d.from = label(e.relatedTarget);
          d.fromRef = refFor(e.relatedTarget);
        }
        emit('focus.change', d, t);
      },
      true
    );
    listen(
      document,
      'focusout',
      function (e) {
        if (e.relatedTarget) return;
        var t = e.target;
        if (!t || t.nodeType !== 1 || isIgnored(t)) return;
        emit('focus.change', { from: label(t), fromRef: refFor(t), toBody: true });
      },
      true
    );
  }

  // -- page health
  var longTasks = 0,
    longTaskMs = 0;
  function emitHealth(reason) {
    var d = {
      hidden: document.visibilityState === 'hidden',
      visibilityState: document.visibilityState,
      focused: document.hasFocus ? document.hasFocus() : null,
      url: redactUrl(location.href),
      title: document.title,
      longTasks: longTasks,
      longTaskMs: Math.round(longTaskMs),
      reason: reason,
      runtime: 'web',
      engine: /Firefox\//.test(navigator.userAgent)
        ? 'gecko'
        : /Chrome\/|Chromium\//.test(navigator.userAgent)
          ? 'blink'
          : /AppleWebKit/.test(navigator.userAgent)
            ? 'webkit'
            : 'other',
      queued: S.outbox.length
    };
    try {
      var m = performance.memory;
      if (m)
        d.memory = {
          usedJSHeapSize: m.usedJSHeapSize,
          totalJSHeapSize: m.totalJSHeapSize,
          jsHeapSizeLimit: m.jsHeapSizeLimit
        };
    } catch (e) {
      /* ignore */
    }
    longTasks = 0;
    longTaskMs = 0;
    emit('page.health', d);
  }
  // alert/confirm/prompt and a beforeunload prompt block the page until the person answers them: each is
  // reported (sent now, before it blocks) so the daemon fails its commands fast and the answer names it.
  function dialogSeen(kind, message, phase) {
    var text = clip(String(message == null ? '' : message), 300);
    emit('page.dialog', { dialogType: kind, message: text, phase: phase });
    if (phase === 'open') flush(); // the page stops here: the report cannot wait for the microtask
  }
  function installDialogs() {
    ['alert', 'confirm', 'prompt'].forEach(wrapDialogFunction);
    installBeforeunloadListeners();
    installOnBeforeunload();
  }
  // window.alert, confirm or prompt, wrapped: reported open before it blocks, closed after.
  function wrapDialogFunction(kind) {
    var orig = window[kind];
    if (typeof orig !== 'function') return;
    var wrapped = function (message) {
      try {
        dialogSeen(kind, message, 'open');
      } catch (e) {
        /* never stand in the page's way */
      }
      try {
        return orig.apply(window, arguments);
      } finally {
        try {
          dialogSeen(kind, '', 'closed');
        } catch (e) {
          /* ignore */
        }
      }
    };
    window[kind] = wrapped;
    S.teardowns.push(function () {
      if (window[kind] === wrapped) window[kind] = orig;
    });
  }
  // a beforeunload handler that prevents the unload makes the browser ask the person
  function unloadPrevented(e) {
    var v = e.returnValue;
    return e.defaultPrevented || (typeof v === 'string' && v !== '') || v === false;
  }
  function unloadReported(e) {
    if (e && e.type === 'beforeunload' && unloadPrevented(e)) dialogSeen('beforeunload', '', 'open');
  }
  // window.addEventListener('beforeunload', fn): fn runs inside a wrapper that tells a prompt.
  function installBeforeunloadListeners() {
    var wrappers = typeof WeakMap === 'function' ? new WeakMap() : null;
    var add = window.addEventListener,
      remove = window.removeEventListener;
    if (!wrappers || typeof add !== 'function') return;
    var addWrapped = function (type, fn, opts) {
      if (type === 'beforeunload' && typeof fn === 'function') {
        var w = wrappers.get(fn);
        if (!w) {
          w = function (e) {
            try {
              return fn.apply(this, arguments);
            } finally {
              unloadReported(e);
            }
          };
          wrappers.set(fn, w);
        }
        return add.call(this, type, w, opts);
      }
      return add.apply(this, arguments);
    };
    var removeWrapped = function (type, fn, opts) {
      if (type === 'beforeunload' && typeof fn === 'function' && wrappers.get(fn))
        return remove.call(this, type, wrappers.get(fn), opts);
      return remove.apply(this, arguments);
    };
    window.addEventListener = addWrapped;
    window.removeEventListener = removeWrapped;
    S.teardowns.push(function () {
      if (window.addEventListener === addWrapped) window.addEventListener = add;
      if (window.removeEventListener === removeWrapped) window.removeEventListener = remove;
    });
  }
  // window.onbeforeunload = fn: a string it returns (or a prevented event) is the prompt
  function installOnBeforeunload() {
    var own = Object.getOwnPropertyDescriptor(window, 'onbeforeunload');
    var d = own || Object.getOwnPropertyDescriptor(Window.prototype, 'onbeforeunload');
    if (!d || !d.set || !d.get || d.configurable === false) return;
    var user = window.onbeforeunload;
    var wrapFor = function (fn) {
      return function (e) {
        var r = fn.apply(this, arguments);
        if ((typeof r === 'string' && r !== '') || unloadPrevented(e)) dialogSeen('beforeunload', '', 'open');
        return r;
      };
    };
    Object.defineProperty(window, 'onbeforeunload', {
      configurable: true,
      enumerable: d.enumerable,
      get: function () {
        return user;
      },
      set: function (fn) {
        user = typeof fn === 'function' ? fn : null;
        d.set.call(window, user ? wrapFor(user) : null);
      }
    });
    if (typeof user === 'function') d.set.call(window, wrapFor(user));
    S.teardowns.push(function () {
      if (own) Object.defineProperty(window, 'onbeforeunload', own);
      else delete window.onbeforeunload;
      try {
        window.onbeforeunload = user;
      } catch (e) {
        /* ignore */
      }
    });
  }
  function installHealth() {
    var iv = N.setInterval(
      guard('health_observer', function () {
        emitHealth('heartbeat');
      }),
      5000
    );
    S.teardowns.push(function () {
      N.clearInterval(iv);
    });
    listen(document, 'visibilitychange', function () {
      emitHealth('visibilitychange');
      if (document.visibilityState === 'visible') retryNow();
    });
    listen(window, 'focus', function () {
      emitHealth('focus');
    });
    listen(window, 'blur', function () {
      emitHealth('blur');
    });
    listen(window, 'online', function () {
      retryNow();
    });
    try {
      if (
        window.PerformanceObserver &&
        PerformanceObserver.supportedEntryTypes &&
        PerformanceObserver.supportedEntryTypes.indexOf('longtask') >= 0
      ) {
        var po = new PerformanceObserver(function (list) {
          list.getEntries().forEach(function (en) {
            longTasks++;
            longTaskMs += en.duration;
          });
        });
        po.observe({ type: 'longtask', buffered: true });
        S.teardowns.push(function () {
          po.disconnect();
        });
      }
    } catch (e) {
      /* ignore */
    }
    emitHealth('initial');
  }

  // -- cross-origin frames are a blind spot
  function frameShown(f) {
    try {
      var r = f.getBoundingClientRect();
      if (r.width < 2 || r.height < 2) return false;
      var cs = styleOf(f);
      return !cs || (cs.visibility !== 'hidden' && cs.opacity !== '0');
    } catch (e) {
      return true;
    }
  }
  function checkFrames() {
    try {
      var frames = document.querySelectorAll('iframe,frame'),
        n = 0,
        srcs = [];
      for (var i = 0; i < frames.length; i++) {
        // a frame nobody can see (a payment library's hidden channel, a tracker) hides nothing
        // from the user; it counts once it is shown (the alert observer rechecks on style changes)
        if (!frameShown(frames[i])) continue;
        var ok = false;
        try {
          ok = !!frames[i].contentDocument;
        } catch (e) {
          ok = false;
        }
        // a frame just mounted shows a readable about:blank until its own page arrives
        if (ok && frames[i].src) {
          try {
            var to = new URL(frames[i].src, location.href);
            if (/^https?:$/.test(to.protocol) && to.origin !== location.origin) ok = false;
          } catch (e) {
            /* an odd src: keep what contentDocument said */
          }
        }
        if (!ok && frames[i].src) {
          n++;
          if (srcs.length < 5) srcs.push(redactUrl(frames[i].src));
        }
      }
      if (n !== checkFrames.last) {
        checkFrames.last = n;
        if (n || checkFrames.reported) {
          checkFrames.reported = true;
          emit('blind-spot', {
            reason: 'cross-origin-iframe',
            kind: 'cross-origin-iframe',
            count: n,
            detail: srcs.join(', ')
          });
        }
      }
    } catch (e) {
      /* ignore */
    }
  }

