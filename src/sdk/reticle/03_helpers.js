  // == Section: helpers == small helpers, redaction, the sanitizer
  // provides: warn, microtask, hasOwn, isObj, clip, collapse, norm, isNativeFn, uuid, rand36, ssGet, ssSet,
  //   STORAGE_MUTE, coded, errCode, errMsg, SENSITIVE_KEY, OWN_KEYS, isSensitiveKey, EXTRA_KEYS,
  //   keySensitive, SECRET_PATTERNS, scrub, KV_PAIR, scrubText, redactUrl, describeNode, sanitize,
  //   SAN_PLAIN, sanStr, sanWalk, sanSpecial, sanDeep, sanArray, sanObject, sanKey, safeStringify
  // uses: ERROR_CAP (01), N (01), PREFIX (01), REDACTED (01)
  // ---- small helpers -------------------------------------------------------------------------
  function warn(msg) {
    try {
      N.warn(PREFIX + ' ' + msg);
    } catch (e) {
      /* ignore */
    }
  }
  function microtask(fn) {
    N.then(N.resolve(), fn);
  }
  function hasOwn(o, k) {
    return N.hasOwn(o, k);
  }
  function isObj(v) {
    return v !== null && typeof v === 'object';
  }
  function clip(s, n) {
    s = String(s == null ? '' : s);
    return s.length > n ? N.slice(s, 0, n) + '\u2026' : s;
  }
  function collapse(s) {
    return N.trim(N.replace(String(s == null ? '' : s), /\s+/g, ' '));
  }
  function norm(s) {
    s = collapse(s);
    try {
      s = N.normalize(s, 'NFC');
    } catch (e) {
      /* old engines */
    }
    return s;
  }
  function isNativeFn(f) {
    try {
      return (
        typeof f === 'function' &&
        N.test(/\[native code\]\s*\}\s*$/, N.fnToString(f))
      );
    } catch (e) {
      return false;
    }
  }
  function uuid() {
    try {
      if (window.crypto && window.crypto.randomUUID) return N.randomUUID(window.crypto);
    } catch (e) {
      /* insecure ctx */
    }
    var b = new Uint8Array(16);
    try {
      N.getRandomValues(window.crypto, b);
    } catch (e) {
      for (var i = 0; i < 16; i++) b[i] = N.floor(N.random() * 256);
    }
    b[6] = (b[6] & 15) | 64;
    b[8] = (b[8] & 63) | 128;
    var h = '';
    for (var j = 0; j < 16; j++) {
      h += N.slice(N.invoke(b[j] + 256, 'toString', 16), 1);
      if (j === 3 || j === 5 || j === 7 || j === 9) h += '-';
    }
    return h;
  }
  function rand36(n) {
    var s = '';
    while (s.length < n) s += N.slice(N.invoke(N.random(), 'toString', 36), 2);
    return N.slice(s, 0, n);
  }
  function ssGet(k) {
    try {
      return N.getItem(window.sessionStorage, k);
    } catch (e) {
      return null;
    }
  }
  function ssSet(k, v) {
    try {
      STORAGE_MUTE++;
      N.setItem(window.sessionStorage, k, v);
    } catch (e) {
      /* private mode */
    } finally {
      STORAGE_MUTE--;
    }
  }
  var STORAGE_MUTE = 0;
  // an Error with the machine-readable code the daemon branches on (target_missing, ...)
  function coded(code, message) {
    var e = new Error(message);
    e.code = code;
    return e;
  }
  function errCode(e) {
    try {
      return e && typeof e === 'object' && typeof e.code === 'string' ? e.code : undefined;
    } catch (x) {
      return undefined;
    }
  }
  function errMsg(e) {
    if (e && typeof e === 'object' && 'message' in e) return String(e.message);
    try {
      return String(e);
    } catch (x) {
      return 'unknown error';
    }
  }

  // ---- redaction -----------------------------------------------------------------------------
  var SENSITIVE_KEY = new RegExp(
    '(pass(word|wd|code|phrase)|^pass$|^pwd$|secret|token|api[-_ ]?key|apikey|access[-_]?key|private[-_]?key|' +
      'authorization|^auth$|^cookie$|set-cookie|^cookies$|session[-_]?id|^sid$|^jwt$|credential|credit[-_]?card|' +
      'card[-_]?number|^cvv$|^cvc$|^ssn$|signature$|x-amz-security|x-goog-signature)',
    'i'
  );
  var OWN_KEYS = { sessionId: 1, documentId: 1, requestId: 1 }; // our own identifiers, not secrets
  function isSensitiveKey(k) {
    return typeof k === 'string' && k.length > 0 && !OWN_KEYS[k] && N.test(SENSITIVE_KEY, k);
  }
  var EXTRA_KEYS = [];
  function keySensitive(k) {
    if (isSensitiveKey(k)) return true;
    for (var i = 0; i < EXTRA_KEYS.length; i++) if (EXTRA_KEYS[i] === k) return true;
    return false;
  }
  var SECRET_PATTERNS = [
    [/\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}/g, REDACTED],
    [/\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+\/=-]{12,}/gi, '$1 ' + REDACTED],
    [/\b(?:sk|rk|pk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{16,}/g, REDACTED],
    [/\bgh[pousr]_[A-Za-z0-9]{20,}/g, REDACTED],
    [/\bgithub_pat_[A-Za-z0-9_]{20,}/g, REDACTED],
    [/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, REDACTED],
    [/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, REDACTED],
    [/\bya29\.[A-Za-z0-9_-]{20,}/g, REDACTED],
    [/\bAIza[0-9A-Za-z_-]{30,}/g, REDACTED]
  ];
  function scrub(s) {
    if (typeof s !== 'string' || s.length < 8) return s;
    for (var i = 0; i < SECRET_PATTERNS.length; i++)
      s = N.replace(s, SECRET_PATTERNS[i][0], SECRET_PATTERNS[i][1]);
    return s;
  }
  var KV_PAIR =
    /((?:["']?)([A-Za-z0-9_.-]{2,64})(?:["']?)\s*[:=]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s&,;}\]]+)/g;
  function scrubText(s) {
    if (typeof s !== 'string') return s;
    s = scrub(s);
    return N.replace(s, KV_PAIR, function (all, lead, key, val) {
      if (!keySensitive(key)) return all;
      var q = N.charAt(val, 0) === '"' ? '"' : N.charAt(val, 0) === "'" ? "'" : '';
      return lead + q + REDACTED + q;
    });
  }
  function redactUrl(u) {
    if (typeof u !== 'string') {
      try {
        u = String(u);
      } catch (e) {
        return '';
      }
    }
    var out = N.replace(u, /^([a-z][a-z0-9+.-]*:\/\/)([^\/@?#:]*):([^\/@?#]*)@/i,
      '$1$2:' + REDACTED + '@');
    out = N.replace(out, /([?&#;])([^=&#;]+)=([^&#;]*)/g, function (all, sep, k, v) {
      var key = k;
      try {
        key = decodeURIComponent(k);
      } catch (e) {
        /* keep raw */
      }
      return keySensitive(key) ? sep + k + '=' + REDACTED : all;
    });
    out = N.replace(
      out,
      /(\/(?:reset|verify|confirm|activate|invite|magic|magiclink|magic-link|token|key|oauth|unsubscribe|password)[^\/?#]*\/)([^\/?#]{12,})/gi,
      '$1' + REDACTED);
    return scrub(out);
  }

  // ---- sanitizer: JSON-safe, capped, redacted clone ------------------------------------------
  function describeNode(n) {
    try {
      if (n === window) return '[Window]';
      if (n === document) return '[Document]';
      if (n.nodeType === 1) {
        var s = '<' + N.toLowerCase(n.tagName);
        if (n.id) s += '#' + n.id;
        if (typeof n.className === 'string' && N.trim(n.className))
          s += '.' + N.join(N.slice(N.split(N.trim(n.className), /\s+/), 0, 3), '.');
        return s + '>';
      }
      if (n.nodeType === 3) return '#text "' + clip(collapse(n.data), 40) + '"';
      return '[' + (n.nodeName || 'Node') + ']';
    } catch (e) {
      return '[Node]';
    }
  }
  // A JSON-safe, capped, redacted clone of `value`; opt: depth, items, str, budget, nodes, redact,
  // report (its .cut learns how many things were cut). The san* functions share one ctx record.
  function sanitize(value, opt) {
    opt = opt || {};
    var ctx = {
      opt: opt,
      maxDepth: opt.depth == null ? 8 : opt.depth,
      maxItems: opt.items || 200,
      maxStr: opt.str || 65536,
      budget: opt.budget || 262144,
      nodes: 0,
      maxNodes: opt.nodes || 1000,
      cut: 0,
      stack: []
    };
    var out = sanWalk(ctx, value, 0, null);
    if (opt.report) opt.report.cut = ctx.cut;
    return out;
  }
  var SAN_PLAIN = {}; // sanSpecial's answer for a value that is none of its kinds
  function sanStr(ctx, s, key) {
    var cap = key === 'error' ? ERROR_CAP : ctx.maxStr;
    if (s.length > cap) {
      s = N.slice(s, 0, cap) + '\u2026[TRUNCATED]';
      ctx.cut++;
    }
    if (ctx.opt.redact !== false) s = scrub(s);
    ctx.budget -= s.length;
    return s;
  }
  function sanWalk(ctx, v, depth, key) {
    ctx.nodes++;
    if (v === null) return null;
    var t = typeof v;
    if (t === 'string') return sanStr(ctx, v, key);
    if (t === 'number') return isFinite(v) ? v : null;
    if (t === 'boolean') return v;
    if (t === 'bigint') return String(v);
    if (t === 'undefined' || t === 'function' || t === 'symbol') return undefined;
    if (ctx.budget <= 0 || ctx.nodes > ctx.maxNodes) {
      ctx.cut++;
      return '[TRUNCATED]';
    }
    var special = sanSpecial(ctx, v);
    if (special !== SAN_PLAIN) return special;
    if (N.indexOf(ctx.stack, v) >= 0) return '[CIRCULAR]';
    if (depth >= ctx.maxDepth) return sanDeep(ctx, v);
    N.push(ctx.stack, v);
    try {
      if (N.isArray(v) || (ArrayBuffer.isView && N.isView(v) && !(v instanceof DataView)))
        return sanArray(ctx, v, depth);
      if (typeof Map !== 'undefined' && v instanceof Map) {
        var mo = {},
          i = 0;
        N.forEach(v, function (mv, mk) {
          if (i++ < ctx.maxItems) mo[String(mk)] = mv;
        });
        return sanWalk(ctx, mo, depth, key);
      }
      if (typeof Set !== 'undefined' && v instanceof Set) {
        var sa = [];
        N.forEach(v, function (sv) {
          if (sa.length < ctx.maxItems) N.push(sa, sv);
        });
        return sanWalk(ctx, sa, depth, key);
      }
      return sanObject(ctx, v, depth);
    } finally {
      N.pop(ctx.stack);
    }
  }
  // A date, an error, a regex or a DOM node as its short form; SAN_PLAIN for anything else.
  function sanSpecial(ctx, v) {
    try {
      if (v instanceof Date) return isNaN(N.getTime(v)) ? null : N.toISOString(v);
      if (v instanceof Error)
        return { name: sanStr(ctx, String(v.name || 'Error')), message: sanStr(ctx, String(v.message || '')) };
      if (v instanceof RegExp) return String(v);
      if (typeof Node !== 'undefined' && (v instanceof Node || v === window)) return describeNode(v);
    } catch (e) {
      return '[UNSERIALIZABLE]';
    }
    return SAN_PLAIN;
  }
  // A container past the depth cap: its size only.
  function sanDeep(ctx, v) {
    ctx.cut++;
    if (N.isArray(v)) return '[Array(' + v.length + ')]';
    try {
      return '{\u2026' + N.keys(v).length + ' keys}';
    } catch (e) {
      return '{\u2026}';
    }
  }
  function sanArray(ctx, v, depth) {
    var res = [];
    for (var i = 0; i < v.length; i++) {
      if (i >= ctx.maxItems || ctx.budget <= 0) {
        N.push(res, '[TRUNCATED ' + (v.length - i) + ' more]');
        ctx.cut++;
        break;
      }
      var x = sanWalk(ctx, v[i], depth + 1, null);
      N.push(res, x === undefined ? null : x);
    }
    return res;
  }
  function sanObject(ctx, v, depth) {
    var res = {};
    var keys;
    try {
      keys = N.keys(v);
    } catch (e) {
      return '[UNSERIALIZABLE]';
    }
    for (var i = 0; i < keys.length; i++) {
      if (i >= ctx.maxItems || ctx.budget <= 0) {
        res['[TRUNCATED]'] = keys.length - i + ' more keys';
        ctx.cut++;
        break;
      }
      sanKey(ctx, res, v, keys[i], depth);
    }
    return res;
  }
  // One key of an object into res: a sensitive key's scalar redacted, anything else walked.
  function sanKey(ctx, res, v, k, depth) {
    var kk = k.length > 256 ? N.slice(k, 0, 256) : k;
    ctx.budget -= kk.length;
    if (ctx.opt.redact !== false && keySensitive(k)) {
      // a sensitive key holding a scalar is redacted; a container is walked (its own keys decide)
      var raw;
      try {
        raw = v[k];
      } catch (e) {
        raw = null;
      }
      if (!isObj(raw)) {
        if (raw !== undefined && raw !== null && raw !== '') res[kk] = REDACTED;
        else if (raw !== undefined) res[kk] = raw;
        return;
      }
    }
    var val;
    try {
      val = v[k];
    } catch (e) {
      res[kk] = '[UNSERIALIZABLE]';
      return;
    }
    var w = sanWalk(ctx, val, depth + 1, k);
    if (w !== undefined) res[kk] = w;
  }
  function safeStringify(v, cap) {
    try {
      if (typeof v === 'string') return clip(scrub(v), cap || 1000);
      var sv = sanitize(v, { depth: 4, items: 50, str: 1000 });
      if (typeof sv === 'string') return clip(sv, cap || 1000);
      var s = N.stringify(sv);
      return clip(s === undefined ? String(v) : s, cap || 1000);
    } catch (e) {
      try {
        return clip(String(v), cap || 1000);
      } catch (x) {
        return '[unserializable]';
      }
    }
  }

