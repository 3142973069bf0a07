  // == Section: snapshot == tree walking and the snapshot
  // provides: SHADOWS, SHADOW_ROOTS, ROOT_WATCHERS, SHADOW_ROOTS_MAX, noteShadowRoot, liveShadowRoots,
  //   shadowOf, childrenOf, allElements, resolveScope, routeOf, pageStatus, SNAP_NODES, snapshot,
  //   snapDialogs, snapAddUnread, snapVisit, snapLine, snapRoleLine, snapEmptyNote, snapCappedNote
  // uses: N (01), clip (03), norm (03), redactUrl (03), emit (04), internal (04), SKIP_TAGS (06),
  //   isIgnored (06), refFor (06), resolveRef (06), INTERACTIVE (07), getName (07), getRole (07),
  //   getValue (07), isChecked (07), isDisabled (07), isFocused (07), isVisible (07), makeVisCache (07),
  //   ownText (07), styleOf (07), textOf (07), TOASTS (13)
  // ---- tree walking (light DOM + open/captured shadow roots + same-origin iframes) ------------
  var SHADOWS = new WeakMap(); // host -> closed shadow root captured by our attachShadow patch
  var SHADOW_ROOTS = []; // every shadow root seen (open or captured), for observers that search
  var ROOT_WATCHERS = []; // functions told of each new shadow root (the DOM and alert observers)
  var SHADOW_ROOTS_MAX = 2000;
  function noteShadowRoot(root) {
    if (!root || N.indexOf(SHADOW_ROOTS, root) >= 0) return;
    if (SHADOW_ROOTS.length >= SHADOW_ROOTS_MAX) liveShadowRoots();
    if (SHADOW_ROOTS.length >= SHADOW_ROOTS_MAX) {
      // searching more roots on every change costs frames (bench/shadow_alerts.py); say what is unseen
      if (!noteShadowRoot.overCap) {
        noteShadowRoot.overCap = true;
        emit('blind-spot', {
          reason: 'shadow-roots-over-cap',
          kind: 'shadow-roots-over-cap',
          count: 1,
          detail:
            'more than ' +
            SHADOW_ROOTS_MAX +
            ' shadow roots: alerts, toasts and invalid fields in the others are not seen'
        });
      }
      return;
    }
    N.push(SHADOW_ROOTS, root);
    for (var i = 0; i < ROOT_WATCHERS.length; i++) {
      try {
        ROOT_WATCHERS[i](root);
      } catch (e) {
        /* one watcher's failure is not another's */
      }
    }
  }
  // The shadow roots whose hosts are still in a document (the others are dropped from the list).
  function liveShadowRoots() {
    SHADOW_ROOTS = N.filter(SHADOW_ROOTS, function (r) {
      return !!(r.host && r.host.isConnected);
    });
    return SHADOW_ROOTS;
  }
  function shadowOf(el) {
    return el.shadowRoot || N.get(SHADOWS, el) || null;
  }
  // The rendered children of el: a shadow host's children are its shadow tree (light children
  // are reached once, through the slots they are assigned to), a slot's are its assigned nodes.
  function childrenOf(el) {
    var out = [];
    var sr = shadowOf(el);
    if (sr) {
      for (var c = sr.firstElementChild; c; c = c.nextElementSibling) N.push(out, c);
      return out;
    }
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
      try {
        var d = el.contentDocument;
        if (d && d.body) N.push(out, d.body);
      } catch (e) {
        /* cross-origin */
      }
      return out;
    }
    if (el.tagName === 'SLOT') {
      try {
        var as = N.assignedElements(el);
        if (as.length) return N.concat(out, as);
      } catch (e) {
        /* ignore */
      }
    }
    for (var k = el.firstElementChild; k; k = k.nextElementSibling) N.push(out, k);
    return out;
  }
  // every element under root (document order, shadow content after host), up to a cap
  function allElements(root, cap) {
    var out = [],
      stack = [root];
    cap = cap || 20000;
    while (stack.length && out.length < cap) {
      var el = N.pop(stack);
      if (SKIP_TAGS[el.tagName]) continue;
      if (el !== root) N.push(out, el);
      var kids = childrenOf(el);
      for (var i = kids.length - 1; i >= 0; i--) N.push(stack, kids[i]);
    }
    return out;
  }
  function resolveScope(scope) {
    if (scope == null || scope === '') return document.body || document.documentElement;
    if (typeof scope !== 'string') return null;
    if (N.test(/^e\d+$/, scope)) return resolveRef(scope);
    try {
      return N.querySelector(document, scope);
    } catch (e) {
      return null;
    }
  }
  function routeOf() {
    return location.pathname + location.search + location.hash;
  }
  function pageStatus(cache) {
    var st = { route: redactUrl(routeOf()), title: document.title || '' };
    try {
      var dlg = [];
      var cands = N.querySelectorAll(document,
        'dialog[open],[role=dialog],[role=alertdialog],[aria-modal=true]'
      );
      for (var i = 0; i < cands.length && dlg.length < 10; i++) {
        if (isVisible(cands[i], cache) && !isIgnored(cands[i]))
          N.push(dlg, getName(cands[i]) || getRole(cands[i]));
      }
      if (dlg.length) st.visibleDialogs = dlg;
      // what the user is being told: alerts, then statuses and polite live regions
      var told = { alerts: [], statuses: [] };
      var live = N.querySelectorAll(document,
        '[role=alert],[role=alertdialog],[aria-live=assertive],[role=status],[aria-live=polite],output'
      );
      for (var j = 0; j < live.length && told.alerts.length + told.statuses.length < 20; j++) {
        var el = live[j];
        if (!isVisible(el, cache) || isIgnored(el)) continue;
        var said = clip(norm(textOf(el, 0)), 200);
        if (!said) continue;
        var loud = N.test(/^(alert|alertdialog)$/, N.getAttribute(el, 'role') || '') ||
          N.getAttribute(el, 'aria-live') === 'assertive';
        N.push(loud ? told.alerts : told.statuses, { ref: refFor(el), text: said });
      }
      // toasts the app declared (reticle.describe({toasts})): error ones are alerts, the others statuses
      var listed = new Set(N.slice(live));
      N.forEach([['error', told.alerts], ['info', told.statuses]], function (kind) {
        N.forEach(TOASTS[kind[0]] || [], function (sel) {
          var found;
          try {
            found = N.querySelectorAll(document, sel);
          } catch (e) {
            return;
          }
          for (var k = 0; k < found.length && told.alerts.length + told.statuses.length < 20; k++) {
            var t = found[k];
            if (N.has(listed, t) || !isVisible(t, cache) || isIgnored(t)) continue;
            N.add(listed, t);
            var text = clip(norm(textOf(t, 0)), 200);
            if (text) N.push(kind[1], { ref: refFor(t), text: text, toast: true });
          }
        });
      });
      if (told.alerts.length) st.alerts = told.alerts;
      if (told.statuses.length) st.statuses = told.statuses;
      var modal = N.querySelector(document, 'dialog[open]:modal,[aria-modal=true]');
      if (modal && isVisible(modal, cache) && document.body) {
        var others = N.filter(document.body.children, function (c) {
          return !N.contains(c, modal) && !SKIP_TAGS[c.tagName];
        });
        if (
          others.length &&
          N.every(others, function (c) {
            return N.getAttribute(c, 'aria-hidden') === 'true' || c.inert;
          })
        )
          st.overlayHidingPage = true;
      }
    } catch (e) {
      /* :modal unsupported */
    }
    return st;
  }

  // ---- snapshot ------------------------------------------------------------------------------
  var SNAP_NODES = 400,
    SNAP_DEPTH = 20;
  function snapshot(args) {
    var mode = args.mode || 'full';
    if (mode !== 'full' && mode !== 'interactive' && mode !== 'status')
      throw new Error(
        "snapshot mode must be full, interactive or status (got '" + clip(mode, 40) + "')"
      );
    var cache = makeVisCache();
    var status = pageStatus(cache);
    if (mode === 'status') return { tree: '', nodes: 0, truncated: false, status: status };
    var root = resolveScope(args.scope);
    if (!root) return { tree: '', nodes: 0, truncated: false, scopeMissing: true, status: status };
    // one walk: its lines, counts, caps hit, and the refs left unread
    var w = {
      mode: mode,
      lines: [],
      count: 0,
      truncated: false,
      depthHit: false,
      unread: [],
      unreadOverflow: false,
      // Open dialogs go first, so that the node cap can never hide the thing the user
      // is looking at behind a long page; the second pass skips them.
      dialogs: args.scope ? [] : snapDialogs(cache),
      secondPass: false,
      visited: new Set() // an element reachable twice (slots, frames) is printed once
    };
    var includeRoot = !!args.scope && args.includeRoot !== false;
    try {
      for (var dj = 0; dj < w.dialogs.length; dj++) snapVisit(w, w.dialogs[dj], 0, false);
      w.secondPass = true;
      if (includeRoot) snapVisit(w, root, 0, false);
      else {
        var ks = childrenOf(root);
        for (var i = 0; i < ks.length; i++) snapVisit(w, ks[i], 0, false);
      }
    } catch (e) {
      internal('snapshot', e);
    }
    var res = {
      tree: N.join(w.lines, '\n'),
      nodes: w.count,
      truncated: w.truncated || w.depthHit,
      status: status
    };
    if (w.dialogs.length) res.dialogsFirst = w.dialogs.length;
    if (!w.count && !args.scope) snapEmptyNote(res);
    if (w.truncated || w.depthHit) snapCappedNote(w, res);
    return res;
  }
  // The open dialogs a snapshot prints first (at most 5, none inside another).
  function snapDialogs(cache) {
    var dialogs = [];
    try {
      var found = N.querySelectorAll(document, 'dialog[open],[role=dialog],[role=alertdialog]');
      for (var di = 0; di < found.length && dialogs.length < 5; di++) {
        if (isVisible(found[di], cache) && !isIgnored(found[di])) N.push(dialogs, found[di]);
      }
      return N.filter(dialogs, function (d) {
        return !N.some(dialogs, function (o) {
          return o !== d && N.contains(o, d);
        });
      });
    } catch (e) {
      return [];
    }
  }
  function snapAddUnread(w, el) {
    if (w.unread.length < 50) N.push(w.unread, refFor(el));
    else w.unreadOverflow = true;
  }
  function snapVisit(w, el, level, inLive, pname) {
    if (SKIP_TAGS[el.tagName] || isIgnored(el)) return;
    if (w.secondPass && N.indexOf(w.dialogs, el) >= 0) return;
    if (N.has(w.visited, el)) return;
    N.add(w.visited, el);
    if (N.getAttribute(el, 'aria-hidden') === 'true' || el.hidden) return;
    var st = styleOf(el);
    if (st && st.display === 'none') return;
    if (el.tagName === 'INPUT' && el.type === 'hidden') return;
    if (w.count >= SNAP_NODES) {
      w.truncated = true;
      snapAddUnread(w, el);
      return;
    }
    var role = getRole(el);
    var live =
      inLive ||
      role === 'alert' ||
      role === 'status' ||
      role === 'log' ||
      (N.getAttribute(el, 'aria-live') && N.getAttribute(el, 'aria-live') !== 'off');
    var hiddenStyle = st && (st.visibility === 'hidden' || st.visibility === 'collapse');
    var shown = hiddenStyle ? null : snapLine(w.mode, el, role, live, st, pname);
    var childLevel = level,
      childName = pname;
    if (shown) {
      childName = shown.asText == null && shown.name ? clip(shown.name, 100) : null;
      if (level > SNAP_DEPTH) {
        w.depthHit = true;
        snapAddUnread(w, el);
        return;
      }
      N.push(w.lines, N.join(new Array(level + 1), '  ') + shown.line);
      w.count++;
      childLevel = level + 1;
    }
    if (el.tagName === 'SELECT' || el.tagName === 'TEXTAREA') return;
    var kids = childrenOf(el);
    for (var i = 0; i < kids.length; i++) snapVisit(w, kids[i], childLevel, live, childName);
  }
  // The line an element prints in this mode ({line, asText, name}), or null when it prints none.
  function snapLine(mode, el, role, live, st, pname) {
    var name = getName(el, role);
    var emitLine = false,
      asText = null;
    if (mode === 'interactive')
      emitLine = !!INTERACTIVE[role] || (live && (role !== 'generic' || !!name || !!ownText(el)));
    else emitLine = (role !== 'generic' && role !== 'none' && role !== 'presentation') || !!name;
    if (!emitLine && (mode === 'full' || live) && !(el.tagName === 'LABEL' && el.control)) {
      var ot = ownText(el);
      if (ot && ot !== pname) {
        emitLine = true;
        asText = ot;
      } // a text that only repeats its parent's name adds nothing
    }
    if (!emitLine) return null;
    if (asText != null) {
      return { line: '- text "' + N.replace(clip(asText, 80), /"/g, '\\"') + '"', asText: asText, name: name };
    }
    return { line: snapRoleLine(el, role, name, st), asText: null, name: name };
  }
  // "- role "name" (ref=eN): "own text" [value=...] [grid] [flags]" for one element.
  function snapRoleLine(el, role, name, st) {
    var line = '- ' + role;
    var own = name ? null : ownText(el);
    if (name) line += ' "' + N.replace(clip(name, 100), /"/g, '\\"') + '"';
    if (INTERACTIVE[role] || name || own) line += ' (ref=' + refFor(el) + ')';
    if (own) line += ': "' + N.replace(clip(own, 80), /"/g, '\\"') + '"';
    var v = getValue(el);
    if (v != null) line += ' [value="' + N.replace(clip(v, 100), /"/g, '\\"') + '"]';
    if (st && (st.display === 'grid' || st.display === 'inline-grid')) {
      var gc = st.gridTemplateColumns;
      line += gc && gc !== 'none' ? ' [grid-cols:' + clip(gc, 60) + ']' : ' [grid]';
    }
    var flags = [];
    if (isDisabled(el)) N.push(flags, 'disabled');
    if (isChecked(el)) N.push(flags, 'checked');
    if (N.getAttribute(el, 'aria-expanded') === 'true' || (el.tagName === 'DETAILS' && el.open))
      N.push(flags, 'expanded');
    if (isFocused(el)) N.push(flags, 'focused');
    if (flags.length) line += ' [' + N.join(flags, ',') + ']';
    return line;
  }
  // an empty tree right after a page opened is a page that has not rendered yet, not an empty page
  function snapEmptyNote(res) {
    var body = document.body;
    var content =
      !!body &&
      N.some(body.children, function (c) {
        return !SKIP_TAGS[c.tagName];
      });
    var rendered = document.readyState === 'complete' && content;
    res.rendered = rendered;
    res.note = rendered
      ? 'nothing on the page is visible yet (an app may still be rendering); snapshot again in a moment'
      : 'the page has not rendered yet (document.readyState is ' +
        document.readyState +
        (content ? '' : ', its body holds no content') +
        '); snapshot again in a moment';
  }
  function snapCappedNote(w, res) {
    res.capped = { nodes: SNAP_NODES, depth: SNAP_DEPTH };
    if (w.truncated) res.nodeCapHit = true;
    if (w.depthHit) res.depthCapHit = true;
    if (w.unread.length) res.unread = w.unread;
    if (w.unreadOverflow) res.unreadOverflow = true;
    res.note =
      'snapshot capped at ' +
      SNAP_NODES +
      ' nodes / depth ' +
      SNAP_DEPTH +
      '; take a snapshot with scope set to a ref in unread[] to read the rest';
  }

