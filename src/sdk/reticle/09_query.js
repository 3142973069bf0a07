  // == Section: query == text matching, queries, inspect
  // provides: TEXT_MODES, textSpec, textPlaces, QUERY_BYS, normalizeQuery, matchLabel, matcher, runQuery,
  //   filterState, zeroHint, queryCmd, attrsOf, occlusion, inspectCmd
  // uses: N (01), REDACTED (01), clip (03), errMsg (03), isObj (03), keySensitive (03), norm (03),
  //   redactUrl (03), scrub (03), S (04), SKIP_TAGS (06), isIgnored (06), mustResolve (06), refFor (06),
  //   CONTAINER_ROLES (07), byIdText (07), describe (07), getName (07), getRole (07), isVisible (07),
  //   label (07), labelsText (07), makeVisCache (07), nearMisses (07), ownText (07), statesOf (07),
  //   styleOf (07), textOf (07), allElements (08), childrenOf (08), resolveScope (08), routeOf (08)
  // ---- text matching: contains, equals, matches -------------------------------------------------
  // A text spec is a string (read as `dflt`: 'contains' or 'equals') or an object with exactly one
  // of {contains}, {equals}, {matches, flags?}. All compare normalised text (whitespace collapsed,
  // trimmed, NFC): contains is case-insensitive, equals is case-sensitive and whole, matches is a
  // JavaScript regular expression tested against the whole normalised text.
  var TEXT_MODES = ['contains', 'equals', 'matches'];
  function textSpec(v, dflt) {
    var mode = dflt,
      val = v,
      flags = '';
    if (isObj(v)) {
      var given = N.filter(TEXT_MODES, function (m) {
        return v[m] != null;
      });
      if (given.length !== 1)
        throw new Error('a text match needs exactly one of contains, equals or matches');
      mode = given[0];
      val = v[mode];
      flags = v.flags == null ? '' : String(v.flags);
    }
    val = val == null ? '' : String(val);
    var spec = { mode: mode, value: val };
    if (mode === 'matches') {
      var re;
      try {
        re = new RegExp(val, N.replace(flags, /[gy]/g, ''));
      } catch (e) {
        throw new Error(
          'matches ' +
            N.stringify(clip(val, 80)) +
            ' is not a valid regular expression: ' +
            errMsg(e)
        );
      }
      spec.test = function (t) {
        return N.test(re, norm(t));
      };
    } else if (mode === 'equals') {
      var want = norm(val);
      spec.test = function (t) {
        return norm(t) === want;
      };
    } else {
      var needle = N.toLowerCase(norm(val));
      spec.test = function (t) {
        return N.indexOf(N.toLowerCase(norm(t)), needle) >= 0;
      };
    }
    return spec;
  }
  // The innermost elements under root whose whole readable text passes `test`: the places a user
  // would point at. An ancestor that only passes because of a matching descendant is not a place.
  function textPlaces(root, test, cap) {
    var places = [],
      seen = 0;
    cap = cap || 20000;
    function visit(el, depth) {
      if (SKIP_TAGS[el.tagName] || N.getAttribute(el, 'aria-hidden') === 'true' || el.hidden)
        return false;
      if (++seen > cap || depth > 60) return false;
      var inner = false;
      var kids = childrenOf(el);
      for (var i = 0; i < kids.length; i++) if (visit(kids[i], depth + 1)) inner = true;
      if (inner) return true;
      if (isIgnored(el)) return false;
      var t =
        el.tagName === 'INPUT' && N.test(/^(submit|button|reset)$/i, el.type)
          ? el.value
          : textOf(el, 0);
      if (!norm(t) || !test(t)) return false;
      N.push(places, el);
      return true;
    }
    visit(root, 0);
    return places;
  }

  // ---- query / match -------------------------------------------------------------------------
  var QUERY_BYS = ['role', 'text', 'label', 'placeholder', 'testid', 'alt'];
  function normalizeQuery(q) {
    q = q || {};
    if (q.by != null) {
      if (N.indexOf(QUERY_BYS, q.by) < 0)
        throw new Error(
          "unknown query 'by': '" + clip(q.by, 40) + "' (use one of " + N.join(QUERY_BYS, ', ') + ')'
        );
      return { by: q.by, value: q.value, name: q.name };
    }
    var order = ['testid', 'label', 'placeholder', 'alt', 'text', 'role'];
    for (var i = 0; i < order.length; i++) {
      if (q[order[i]] != null && q[order[i]] !== '')
        return { by: order[i], value: q[order[i]], name: q.name };
    }
    throw new Error('a query needs by+value or one of testid, label, placeholder, alt, text, role');
  }
  function matchLabel(el, spec) {
    var parts = labelsText(el);
    var a = N.getAttribute(el, 'aria-label');
    if (a) N.push(parts, norm(a));
    var lb = byIdText(el, 'aria-labelledby');
    if (lb) N.push(parts, lb);
    for (var i = 0; i < parts.length; i++) if (N.test(spec, parts[i])) return true;
    return false;
  }
  // A query's value is a string (contains, case-insensitive; testid exact) or a text spec object;
  // a role query's name is a string (exactly equal) or a text spec object.
  function matcher(q) {
    var v = isObj(q.value) ? q.value : q.value == null ? '' : String(q.value);
    var spec = q.by === 'testid' || q.by === 'role' ? null : textSpec(v, 'contains');
    switch (q.by) {
      case 'testid':
        return function (el) {
          return N.getAttribute(el, 'data-testid') === v;
        };
      case 'placeholder':
        return function (el) {
          var p = N.getAttribute(el, 'placeholder');
          return p != null && N.test(spec, p);
        };
      case 'alt':
        return function (el) {
          var a = N.getAttribute(el, 'alt');
          return a != null && N.test(/^(IMG|INPUT|AREA)$/, el.tagName) && N.test(spec, a);
        };
      case 'text':
        return function (el) {
          var t = ownText(el);
          return !!t && N.test(spec, t);
        };
      case 'label':
        return function (el) {
          if (
            !N.test(/^(INPUT|TEXTAREA|SELECT|BUTTON|METER|PROGRESS|OUTPUT)$/, el.tagName) &&
            !N.hasAttribute(el, 'aria-label') &&
            !N.hasAttribute(el, 'aria-labelledby')
          )
            return false;
          return matchLabel(el, spec);
        };
      case 'role': {
        var want = N.toLowerCase(norm(v));
        var nm = q.name == null ? null : textSpec(q.name, 'equals');
        return function (el) {
          var r = getRole(el);
          if (r !== want) return false;
          return nm == null || N.test(nm, getName(el, r));
        };
      }
    }
    throw new Error('unsupported query');
  }
  function runQuery(args) {
    var q = normalizeQuery(args);
    var root = resolveScope(args.scope);
    if (!root) return { q: q, els: [], scopeMissing: true };
    var test = matcher(q);
    var els = [];
    if (args.self && args.scope) {
      if (test(root)) N.push(els, root);
      return { q: q, els: els };
    }
    if (q.by === 'text' && isObj(q.value) && q.value.contains == null) {
      // equals / matches compare an element's whole text: the innermost elements that pass
      var spec = textSpec(q.value, 'contains');
      var kids = childrenOf(root);
      for (var j = 0; j < kids.length; j++) els = N.concat(els, textPlaces(kids[j], spec.test));
      return { q: q, els: els };
    }
    var all = allElements(root, 50000);
    var seen = new Set();
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (N.has(seen, el)) continue;
      N.add(seen, el);
      try {
        if (test(el) && !isIgnored(el)) N.push(els, el);
      } catch (e) {
        /* odd node */
      }
    }
    return { q: q, els: els };
  }
  function filterState(els, state, cache) {
    if (!state) return els;
    return N.filter(els, function (el) {
      if (state === 'inViewport') {
        if (!isVisible(el, cache)) return false;
        var b = N.getBoundingClientRect(el);
        return (
          b.width > 0 &&
          b.height > 0 &&
          b.bottom > 0 &&
          b.right > 0 &&
          b.top < innerHeight &&
          b.left < innerWidth
        );
      }
      return N.indexOf(statesOf(el, cache), state) >= 0;
    });
  }
  function zeroHint() {
    var hint = { route: redactUrl(routeOf()), presentRegions: [], presentTestids: [] };
    try {
      var cache = makeVisCache();
      var all = allElements(document.body || document.documentElement, 5000);
      var tids = {};
      for (var i = 0; i < all.length; i++) {
        var el = all[i];
        var tid = N.getAttribute(el, 'data-testid');
        if (tid && hint.presentTestids.length < 12 && !tids[tid]) {
          tids[tid] = 1;
          N.push(hint.presentTestids, tid);
        }
        if (hint.presentRegions.length < 10) {
          var role = getRole(el);
          if (CONTAINER_ROLES[role] && isVisible(el, cache)) {
            var kids = el.children,
              sample = [];
            for (var j = 0; j < kids.length && sample.length < 3; j++) {
              var kr = getRole(kids[j]),
                kn = getName(kids[j], kr);
              if (kr !== 'generic' || kn) N.push(sample, kr + (kn ? '[' + clip(kn, 30) + ']' : ''));
            }
            var reg = { role: role, childCount: kids.length, sample: sample, ref: refFor(el) };
            var nm = getName(el, role);
            if (nm) reg.name = clip(nm, 60);
            N.push(hint.presentRegions, reg);
          }
        }
      }
      var cap = S.caps.testids || [];
      for (var k = 0; k < cap.length; k++)
        if (tids[cap[k]]) {
          hint.knownEmptyState = true;
          break;
        }
    } catch (e) {
      /* hint is best-effort */
    }
    return hint;
  }
  function queryCmd(args) {
    var r = runQuery(args);
    var cache = makeVisCache();
    var els = filterState(r.els, args.state, cache);
    var count = els.length;
    if (r.scopeMissing) return { elements: [], count: 0, scopeMissing: true };
    if (args.count_only || args.countOnly) {
      var co = { count: count };
      if (count === 0) {
        co.hint = zeroHint();
        var nm0 = nearMisses(r.q, resolveScope(args.scope));
        if (nm0.length) co.hint.nearMisses = nm0;
      }
      return co;
    }
    var limit = args.limit == null ? 200 : N.max(0, N.min(200, Number(args.limit) || 0));
    var res = { elements: [], count: count };
    for (var i = 0; i < els.length && i < limit; i++) {
      var d = describe(els[i], cache);
      if (args.attrs && args.attrs.length) d.attrs = attrsOf(els[i], args.attrs);
      N.push(res.elements, d);
    }
    if (count > limit) {
      res.total = count;
      res.truncated = true;
    }
    if (count === 0) {
      res.hint = zeroHint();
      var nm = nearMisses(r.q, resolveScope(args.scope));
      if (nm.length) res.hint.nearMisses = nm;
    }
    return res;
  }
  function attrsOf(el, names) {
    var out = {};
    for (var i = 0; i < names.length && i < 12; i++) {
      var n = String(names[i]);
      var v = N.getAttribute(el, n);
      if (v == null) continue;
      out[n] = keySensitive(n) ? REDACTED : clip(scrub(v), 512);
    }
    return out;
  }

  // ---- inspect -------------------------------------------------------------------------------
  function occlusion(el) {
    try {
      var b = N.getBoundingClientRect(el);
      if (!b.width || !b.height) return { occluded: false, occludedBy: null };
      var x = b.left + b.width / 2,
        y = b.top + b.height / 2;
      if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight)
        return { occluded: false, occludedBy: null, offscreen: true };
      var root = el.getRootNode ? N.getRootNode(el) : document;
      var top =
        (root.elementFromPoint ? N.elementFromPoint(root, x, y) : null) ||
        N.elementFromPoint(document, x, y);
      if (!top || isIgnored(top)) return { occluded: false, occludedBy: null };
      if (top === el || N.contains(el, top) || N.contains(top, el))
        return { occluded: false, occludedBy: null };
      // a <label> for the element counts as the element
      if (top.tagName === 'LABEL' && top.control === el)
        return { occluded: false, occludedBy: null };
      return { occluded: true, occludedBy: refFor(top), occludedByLabel: label(top) };
    } catch (e) {
      return { occluded: false, occludedBy: null };
    }
  }
  function inspectCmd(args) {
    var el = mustResolve(args.ref);
    var d = describe(el, makeVisCache());
    d.tag = N.toLowerCase(el.tagName);
    if (el.id) d.id = el.id;
    if (el.href) d.href = redactUrl(String(el.href));
    var form = el.form || (el.closest && N.closest(el, 'form'));
    if (form) {
      d.formAction = redactUrl(N.getAttribute(form, 'action') || '');
      d.formText = clip(norm(textOf(form, 0)), 200);
    }
    var b = N.getBoundingClientRect(el);
    d.box = {
      x: N.round(b.left),
      y: N.round(b.top),
      width: N.round(b.width),
      height: N.round(b.height)
    };
    d.inViewport =
      b.width > 0 &&
      b.height > 0 &&
      b.bottom > 0 &&
      b.right > 0 &&
      b.top < innerHeight &&
      b.left < innerWidth;
    var oc = occlusion(el);
    d.occluded = oc.occluded;
    d.occludedBy = oc.occludedBy;
    if (oc.occludedByLabel) d.occludedByLabel = oc.occludedByLabel;
    var st = styleOf(el);
    if (st) {
      d.styles = {
        color: st.color,
        backgroundColor: st.backgroundColor,
        opacity: st.opacity,
        cursor: st.cursor,
        display: st.display,
        visibility: st.visibility,
        pointerEvents: st.pointerEvents,
        fontSize: st.fontSize,
        position: st.position,
        zIndex: st.zIndex
      };
      d.scroll = {
        scrollTop: el.scrollTop,
        scrollHeight: el.scrollHeight,
        clientHeight: el.clientHeight,
        overflowY: st.overflowY
      };
    }
    var at = {};
    for (var i = 0; i < el.attributes.length && i < 30; i++) {
      var a = el.attributes[i];
      if (a.name === 'style' || a.name === 'value') continue;
      at[a.name] = keySensitive(a.name) ? REDACTED : clip(scrub(a.value), 200);
    }
    d.attributes = at;
    d.childElementCount = el.childElementCount;
    return d;
  }

