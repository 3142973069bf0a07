  // == Section: console == console calls and uncaught errors
  // provides: formatArgs, argSummary, cleanStack, callerStack, inConsole, installConsole, installErrors
  // uses: N (01), STACK_CAP (01), clip (03), describeNode (03), redactUrl (03), safeStringify (03),
  //   scrub (03), emit (04), listen (11), patch (11), rateCap (11), HANDLING (12)
  // -- console and errors
  function formatArgs(args) {
    var parts = [],
      i = 0;
    if (typeof args[0] === 'string' && N.test(/%[sdifoOc]/, args[0]) && args.length > 1) {
      i = 1;
      var fmt = N.replace(args[0], /%([sdifoOc%])/g, function (all, f) {
        if (f === '%') return '%';
        if (i >= args.length) return all;
        var a = args[i++];
        if (f === 'c') return '';
        if (f === 'd' || f === 'i') return String(parseInt(a, 10));
        if (f === 'f') return String(parseFloat(a));
        if (f === 's') return typeof a === 'string' ? a : safeStringify(a, 500);
        return safeStringify(a, 1000);
      });
      N.push(parts, fmt);
    }
    for (; i < args.length; i++) {
      var a = args[i];
      if (typeof a === 'string') N.push(parts, a);
      else if (a instanceof Error)
        N.push(parts, (a.name && a.name !== 'Error' ? a.name + ': ' : '') + a.message);
      else N.push(parts, safeStringify(a, 1000));
    }
    return clip(scrub(N.join(parts, ' ')), 4000);
  }
  function argSummary(a) {
    if (a === null) return 'null';
    var t = typeof a;
    if (t === 'string') return clip(scrub(a), 200);
    if (t === 'number' || t === 'boolean' || t === 'undefined' || t === 'bigint') return String(a);
    if (t === 'function') return '[Function ' + (a.name || 'anonymous') + ']';
    if (t === 'symbol') {
      try {
        return N.invoke(a, 'toString');
      } catch (e) {
        return 'Symbol()';
      }
    }
    if (a instanceof Error) return '[' + (a.name || 'Error') + ': ' + clip(a.message, 150) + ']';
    if (typeof Node !== 'undefined' && a instanceof Node) return describeNode(a);
    if (N.isArray(a)) return '[Array(' + a.length + ')]';
    try {
      return (
        '{' +
        N.join(N.slice(N.keys(a), 0, 8), ', ') +
        (N.keys(a).length > 8 ? ', \u2026' : '') +
        '}'
      );
    } catch (e) {
      return '[object]';
    }
  }
  // Reticle's own frames out (its script, or in a device the injected script, which has no URL); the
  // daemon picks the app's innermost frame of what is left and maps it through the page's source map.
  function cleanStack(s) {
    if (!s) return undefined;
    var lines = N.filter(N.split(String(s), '\n'), function (l) {
        return !N.test(/reticle(\.js|-sdk)|\(<anonymous>:\d|^\s*at <anonymous>:\d/, l);
      });
    return clip(scrub(N.join(lines, '\n')), STACK_CAP);
  }
  // Where the page called from (a fetch, an XHR's send, a beacon): at most 10 frames of the app's call.
  function callerStack() {
    try {
      var s = new Error().stack;
      return s ? cleanStack(N.join(N.slice(N.split(String(s), '\n'), 1, 16), '\n')) : undefined;
    } catch (e) {
      return undefined;
    }
  }
  var inConsole = 0;
  function installConsole() {
    var allow = rateCap('console', 500);
    N.forEach(['log', 'info', 'warn', 'error', 'debug'], function (level) {
      if (!window.console || typeof window.console[level] !== 'function') return;
      patch(window.console, level, function (orig) {
        return function () {
          if (!inConsole) {
            inConsole++;
            try {
              if (allow()) {
                var args = N.slice(arguments);
                var text = formatArgs(args);
                var d = { text: text, message: text, args: N.map(N.slice(args, 0, 10), argSummary) };
                if (args.length > 10) d.argsTruncated = args.length - 10;
                if (HANDLING != null && level === 'error') d.during = HANDLING; // logged handling that failure
                if (level === 'error' || level === 'warn') {
                  var errArg = N.filter(args, function (a) {
                    return a instanceof Error;
                  })[0];
                  if (errArg) d.stack = cleanStack(errArg.stack);
                  else if (level === 'error') {
                    try {
                      d.stack = cleanStack(N.join(N.slice(N.split(new Error().stack, '\n'), 2), '\n'));
                    } catch (e) {
                      /* ignore */
                    }
                  }
                }
                emit('console.' + level, d);
              }
            } catch (e) {
              /* never break the app's console */
            }
            inConsole--;
          }
          return N.apply(orig, this, arguments);
        };
      });
    });
  }
  function installErrors() {
    listen(
      window,
      'error',
      function (e) {
        // resource load errors have no message
        if (!e || (!(e instanceof ErrorEvent) && !e.error && !e.message)) return;
        if (e.target && e.target !== window && e.target.nodeType === 1) return;
        var err = e.error;
        var d = {
          kind: 'error',
          message: clip(scrub(e.message || (err && err.message) || 'error'), 2000),
          source: redactUrl(e.filename || ''),
          line: e.lineno,
          column: e.colno
        };
        if (err && err.stack) d.stack = cleanStack(err.stack);
        if (err && err.name) d.name = err.name;
        emit('error.uncaught', d);
      },
      true
    );
    listen(window, 'unhandledrejection', function (e) {
      var r = e.reason;
      var d = {
        kind: 'unhandledrejection',
        message: clip(
          scrub(
            r instanceof Error ? r.message : typeof r === 'string' ? r : safeStringify(r, 1000)
          ),
          2000
        )
      };
      if (r && r.stack) d.stack = cleanStack(r.stack);
      if (r && r.name) d.name = r.name;
      emit('error.uncaught', d);
    });
  }

