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
      focused: document.hasFocus ? N.hasFocus(document) : null,
      url: redactUrl(location.href),
      title: document.title,
      longTasks: longTasks,
      longTaskMs: N.round(longTaskMs),
      reason: reason,
      runtime: 'web',
      engine: N.test(/Firefox\//, navigator.userAgent)
        ? 'gecko'
        : N.test(/Chrome\/|Chromium\//, navigator.userAgent)
          ? 'blink'
          : N.test(/AppleWebKit/, navigator.userAgent)
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
    N.forEach(['alert', 'confirm', 'prompt'], wrapDialogFunction);
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
        return N.apply(orig, window, arguments);
      } finally {
        try {
          dialogSeen(kind, '', 'closed');
        } catch (e) {
          /* ignore */
        }
      }
    };
    window[kind] = wrapped;
    N.push(S.teardowns, function () {
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
        var w = N.get(wrappers, fn);
        if (!w) {
          w = function (e) {
            try {
              return N.apply(fn, this, arguments);
            } finally {
              unloadReported(e);
            }
          };
          N.set(wrappers, fn, w);
        }
        return N.call(add, this, type, w, opts);
      }
      return N.apply(add, this, arguments);
    };
    var removeWrapped = function (type, fn, opts) {
      if (type === 'beforeunload' && typeof fn === 'function' && N.get(wrappers, fn))
        return N.call(remove, this, type, N.get(wrappers, fn), opts);
      return N.apply(remove, this, arguments);
    };
    window.addEventListener = addWrapped;
    window.removeEventListener = removeWrapped;
    N.push(S.teardowns, function () {
      if (window.addEventListener === addWrapped) window.addEventListener = add;
      if (window.removeEventListener === removeWrapped) window.removeEventListener = remove;
    });
  }
  // window.onbeforeunload = fn: a string it returns (or a prevented event) is the prompt
  function installOnBeforeunload() {
    var own = N.getOwnPropertyDescriptor(window, 'onbeforeunload');
    var d = own || N.getOwnPropertyDescriptor(Window.prototype, 'onbeforeunload');
    if (!d || !d.set || !d.get || d.configurable === false) return;
    var user = window.onbeforeunload;
    var wrapFor = function (fn) {
      return function (e) {
        var r = N.apply(fn, this, arguments);
        if ((typeof r === 'string' && r !== '') || unloadPrevented(e)) dialogSeen('beforeunload', '', 'open');
        return r;
      };
    };
    N.defineProperty(window, 'onbeforeunload', {
      configurable: true,
      enumerable: d.enumerable,
      get: function () {
        return user;
      },
      set: function (fn) {
        user = typeof fn === 'function' ? fn : null;
        N.call(d.set, window, user ? wrapFor(user) : null);
      }
    });
    if (typeof user === 'function') N.call(d.set, window, wrapFor(user));
    N.push(S.teardowns, function () {
      if (own) N.defineProperty(window, 'onbeforeunload', own);
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
    N.push(S.teardowns, function () {
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
        N.indexOf(PerformanceObserver.supportedEntryTypes, 'longtask') >= 0
      ) {
        var po = new PerformanceObserver(function (list) {
          N.forEach(N.getEntries(list), function (en) {
            longTasks++;
            longTaskMs += en.duration;
          });
        });
        N.observe(po, { type: 'longtask', buffered: true });
        N.push(S.teardowns, function () {
          N.disconnect(po);
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
      var r = N.getBoundingClientRect(f);
      if (r.width < 2 || r.height < 2) return false;
      var cs = styleOf(f);
      return !cs || (cs.visibility !== 'hidden' && cs.opacity !== '0');
    } catch (e) {
      return true;
    }
  }
  function checkFrames() {
    try {
      var frames = N.querySelectorAll(document, 'iframe,frame'),
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
            if (N.test(/^https?:$/, to.protocol) && to.origin !== location.origin) ok = false;
          } catch (e) {
            /* an odd src: keep what contentDocument said */
          }
        }
        if (!ok && frames[i].src) {
          n++;
          if (srcs.length < 5) N.push(srcs, redactUrl(frames[i].src));
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
            detail: N.join(srcs, ', ')
          });
        }
      }
    } catch (e) {
      /* ignore */
    }
  }

