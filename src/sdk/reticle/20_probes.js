  // == Section: probes == the probes the daemon's predicates read
  // provides: evalProbe, probeElement, probeText, probeTextSpec, probeTextMatches, probePageText
  // uses: N (01), clip (03), hasOwn (03), norm (03), redactUrl (03), describe (07), isVisible (07),
  //   makeVisCache (07), nearMisses (07), textOf (07), resolveScope (08), TEXT_MODES (09), filterState (09),
  //   runQuery (09), textPlaces (09), textSpec (09), zeroHint (09), storageRead (17), stateRead (19)
  // ---- probes for the daemon's predicate engine ------------------------------------------------
  function evalProbe(args) {
    var kind = args.kind;
    var cache = makeVisCache();
    if (kind === 'element') return probeElement(args, cache);
    if (kind === 'text') return probeText(args, cache);
    if (kind === 'route')
      return {
        path: location.pathname,
        pathname: location.pathname,
        href: redactUrl(location.href),
        hash: redactUrl(location.hash),
        search: redactUrl(location.search),
        title: document.title
      };
    if (kind === 'state') return stateRead(args);
    if (kind === 'storage') return storageRead(args);
    throw new Error(
      "eval_probe kind must be element, text, route, state or storage (got '" +
        clip(kind, 40) +
        "')"
    );
  }
  function probeElement(args, cache) {
    var q = {};
    for (var k in args) if (hasOwn(args, k) && k !== 'kind') q[k] = args[k];
    var r = runQuery(q);
    if (r.scopeMissing)
      return { count: 0, visible: false, visibleCount: 0, elements: [], scopeMissing: true };
    var els = filterState(r.els, args.state, cache);
    var vis = N.filter(els, function (e) {
      return isVisible(e, cache);
    });
    var lim = N.min(200, args.limit == null ? 10 : Number(args.limit) || 10);
    var res = {
      count: els.length,
      visible: vis.length > 0,
      visibleCount: vis.length,
      elements: N.map(N.slice(els, 0, lim), function (e) {
        return describe(e, cache);
      })
    };
    if (els.length > lim) res.described = lim;
    if (!els.length) {
      res.hint = zeroHint();
      var near = nearMisses(r.q, resolveScope(args.scope));
      if (near.length) res.hint.nearMisses = near;
    }
    return res;
  }
  // contains (case-insensitive substring of an element's own text), equals (an element's whole
  // text, whitespace-normalised, case-sensitive) or matches (a RegExp over an element's whole
  // text). Only readable text counts: never script, style, template or noscript source.
  function probeText(args, cache) {
    var spec = probeTextSpec(args);
    var matches = probeTextMatches(spec, args);
    if (!matches) return { found: false, count: 0, places: 0, scopeMissing: true };
    var visM = N.filter(matches, function (e) {
      return isVisible(e, cache);
    });
    var pool = args.visible ? visM : matches;
    var out = {
      found: pool.length > 0,
      mode: spec.mode,
      count: pool.length,
      places: pool.length,
      visibleCount: visM.length,
      elements: N.map(N.slice(pool, 0, 5), function (e) {
        return describe(e, cache);
      })
    };
    if (pool.length) out.sample = clip(norm(textOf(pool[0], 0)), 200);
    else if (spec.mode === 'contains') probePageText(out, spec, args);
    if (spec.mode === 'contains' && norm(spec.value).length <= 3) out.short = true;
    return out;
  }
  function probeTextSpec(args) {
    var given = N.filter(TEXT_MODES, function (m) {
      return args[m] != null && args[m] !== '';
    });
    if (given.length > 1) throw new Error('text probe takes one of contains, equals or matches');
    if (given.length) {
      var so = {};
      so[given[0]] = args[given[0]];
      if (args.flags != null) so.flags = args.flags;
      return textSpec(so, 'contains');
    }
    var needle = args.text != null ? args.text : args.value;
    if (needle == null || needle === '') throw new Error('text probe needs contains, equals or matches');
    return textSpec(needle, 'contains');
  }
  // The elements whose text matches the spec, or null when the scope is missing.
  function probeTextMatches(spec, args) {
    if (spec.mode === 'contains') {
      var rr = runQuery({ by: 'text', value: spec.value, scope: args.scope });
      return rr.scopeMissing ? null : rr.els;
    }
    var troot = resolveScope(args.scope);
    return troot ? textPlaces(troot, spec.test) : null;
  }
  // text split across elements: fall back to the readable page text
  function probePageText(out, spec, args) {
    var root = resolveScope(args.scope);
    var inner = root ? norm(args.visible ? root.innerText : textOf(root, 0)) : '';
    var idx = N.indexOf(N.toLowerCase(inner), N.toLowerCase(norm(spec.value)));
    if (idx >= 0) {
      out.found = true;
      out.via = 'page-text';
      out.places = 1;
      out.sample = clip(N.slice(inner, N.max(0, idx - 60), idx + spec.value.length + 60), 200);
    }
  }

