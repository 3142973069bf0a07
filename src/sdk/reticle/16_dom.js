  // == Section: dom == DOM mutations, shadow roots, animations
  // provides: ATTRS, DOM_CAP, inSource, DOM_MEANINGFUL, domFrame, domRoom, domRecord, domAttr,
  //   domCharacterData, domChildList, domAddedNode, domRemovedNode, domTruncated, regionOf, DOM_OBSERVE,
  //   installDom, installShadowCapture, installAnimations
  // uses: N (01), REDACTED (01), clip (03), describeNode (03), keySensitive (03), norm (03), scrub (03),
  //   S (04), emit (04), internal (04), REF_OF (06), SKIP_TAGS (06), isIgnored (06), refFor (06),
  //   getName (07), getRole (07), isSecretField (07), isVisible (07), label (07), makeVisCache (07),
  //   textOf (07), ROOT_WATCHERS (08), SHADOWS (08), noteShadowRoot (08), listen (11), patch (11),
  //   rateCap (11)
  // -- DOM mutations, coalesced per animation frame
  var ATTRS = [
    'class',
    'hidden',
    'disabled',
    'open',
    'aria-hidden',
    'aria-expanded',
    'aria-selected',
    'aria-checked',
    'aria-pressed',
    'aria-busy',
    'aria-invalid',
    'data-state',
    'style',
    'src',
    'href',
    'value',
    'checked',
    'role',
    'aria-label'
  ];
  var DOM_CAP = 40;
  // Text inside script, style, template, noscript or head is source, not page text (a CSS-in-JS
  // library writing into a <style> is not a text change a user can read).
  function inSource(el) {
    try {
      return !!N.closest(el, 'script,style,template,noscript,head');
    } catch (e) {
      return false;
    }
  }
  var DOM_MEANINGFUL =
    'button,a[href],input,select,textarea,[role],h1,h2,h3,h4,h5,h6,img,li,dialog,form,table';
  // One animation frame's worth of DOM events: counts against DOM_CAP, drops, what was seen.
  function domFrame() {
    return {
      added: 0,
      removed: 0,
      changed: 0,
      drop: { added: 0, removed: 0, changed: 0 },
      seenAttr: new Map(),
      seenText: new Set(),
      cache: makeVisCache()
    };
  }
  // Counts one more event of a kind (added, removed, changed) in the frame; false (and a drop
  // counted) past the cap.
  function domRoom(f, kind) {
    if (f[kind] >= DOM_CAP) {
      f.drop[kind]++;
      return false;
    }
    f[kind]++;
    return true;
  }
  function domRecord(f, r) {
    var tgt = r.target && r.target.nodeType === 1 ? r.target : r.target && r.target.parentElement;
    if (tgt && isIgnored(tgt)) return;
    if (r.type === 'attributes') domAttr(f, r);
    else if (r.type === 'characterData') domCharacterData(f, r);
    else if (r.type === 'childList') domChildList(f, r);
  }
  function domAttr(f, r) {
    var key = r.attributeName;
    var prev = N.get(f.seenAttr, r.target);
    if (prev && prev[key]) return; // coalesce: first old value wins, current value read now
    if (!prev) {
      prev = {};
      N.set(f.seenAttr, r.target, prev);
    }
    prev[key] = 1;
    var cur = N.getAttribute(r.target, key);
    if (cur === r.oldValue) return;
    if (!domRoom(f, 'changed')) return;
    var secret = keySensitive(key) || (key === 'value' && isSecretField(r.target));
    var ad = { attr: key, target: label(r.target) };
    if (cur != null) ad.value = secret ? REDACTED : clip(scrub(cur), 120);
    if (r.oldValue != null) ad.old = secret ? REDACTED : clip(scrub(r.oldValue), 120);
    emit('dom.attr', ad, r.target);
  }
  function domCharacterData(f, r) {
    var pe = r.target.parentElement;
    if (!pe || N.has(f.seenText, pe) || inSource(pe)) return;
    N.add(f.seenText, pe);
    if (!domRoom(f, 'changed')) return;
    var td = { text: clip(norm(textOf(pe, 0)), 80), target: label(pe) };
    if (r.oldValue != null) td.old = clip(norm(r.oldValue), 80);
    emit('dom.text', td, pe);
  }
  function domChildList(f, r) {
    var textTouched = false;
    for (var a = 0; a < r.addedNodes.length; a++) if (domAddedNode(f, r.addedNodes[a])) textTouched = true;
    for (var b = 0; b < r.removedNodes.length; b++) if (domRemovedNode(f, r, r.removedNodes[b])) textTouched = true;
    if (textTouched && r.target.nodeType === 1 && !N.has(f.seenText, r.target) && !inSource(r.target)) {
      N.add(f.seenText, r.target);
      if (!domRoom(f, 'changed')) return;
      emit('dom.text', { text: clip(norm(textOf(r.target, 0)), 80), target: label(r.target) }, r.target);
    }
  }
  // One added node: a dom.added (and visible.shown for a dialog or alert); true when it touched text.
  function domAddedNode(f, n) {
    if (n.nodeType === 3) return !!N.trim(n.data);
    if (n.nodeType !== 1 || !n.isConnected || SKIP_TAGS[n.tagName] || isIgnored(n)) return false;
    var role = getRole(n),
      nm = getName(n, role);
    var textTouched = false;
    if ((role === 'generic' || role === 'none' || role === 'presentation') && !nm) {
      // unnamed wrapper: summarise its meaningful descendants count
      var inner = n.querySelectorAll ? N.querySelectorAll(n, DOM_MEANINGFUL) : [];
      if (!inner.length) {
        if (norm(n.textContent)) textTouched = true;
        else return false;
      }
      if (!domRoom(f, 'added')) return textTouched;
      emit(
        'dom.added',
        {
          role: role,
          tag: N.toLowerCase(n.tagName),
          target: describeNode(n),
          descendants: inner.length,
          text: clip(norm(n.textContent), 80) || undefined,
          region: regionOf(n)
        },
        n
      );
      return textTouched;
    }
    if (!domRoom(f, 'added')) return false;
    var tag = N.toLowerCase(n.tagName);
    emit('dom.added', { role: role, name: nm, tag: tag, target: label(n), region: regionOf(n) }, n);
    var shows = role === 'dialog' || role === 'alertdialog' || role === 'alert' || role === 'status';
    if ((shows || N.getAttribute(n, 'aria-modal') === 'true') && isVisible(n, f.cache)) {
      emit('visible.shown', { role: role, name: nm }, n);
    }
    return false;
  }
  // One removed node of record r: a dom.removed; true when it touched text.
  function domRemovedNode(f, r, m) {
    if (m.nodeType === 3) return !!N.trim(m.data);
    if (m.nodeType !== 1 || SKIP_TAGS[m.tagName] || isIgnored(m)) return false;
    var rr = getRole(m),
      rn = getName(m, rr);
    if ((rr === 'generic' || rr === 'none') && !rn) {
      var cnt = m.querySelectorAll ? N.querySelectorAll(m, DOM_MEANINGFUL).length : 0;
      if (!cnt || !domRoom(f, 'removed')) return false;
      emit('dom.removed', {
        role: rr,
        tag: N.toLowerCase(m.tagName),
        target: describeNode(m),
        descendants: cnt,
        region: r.target && r.target.nodeType === 1 ? regionOf(r.target) : undefined
      });
      return false;
    }
    if (!domRoom(f, 'removed')) return false;
    var rd = { role: rr, name: rn, tag: N.toLowerCase(m.tagName), target: rr + (rn ? ' "' + clip(rn, 60) + '"' : '') };
    var oldRef = N.get(REF_OF, m);
    if (oldRef) rd.formerRef = oldRef;
    emit('dom.removed', rd);
    return false;
  }
  // The truncated event of a frame that dropped events (or records past the pending cap); true if sent.
  function domTruncated(f, overflowRecords) {
    var drop = f.drop.added + f.drop.removed + f.drop.changed + overflowRecords;
    if (!drop) return false;
    emit('truncated', {
      what: 'dom',
      channel: 'dom',
      count: drop,
      dropped: drop,
      reason: 'per-frame cap of ' + DOM_CAP + ' added/removed/changed events',
      detail: {
        added: f.drop.added,
        removed: f.drop.removed,
        changed: f.drop.changed,
        overflowRecords: overflowRecords
      }
    });
    return true;
  }
  function regionOf(n) {
    try {
      var tid = n.parentElement && N.closest(n.parentElement, '[data-testid]');
      if (tid) return N.getAttribute(tid, 'data-testid');
      return n.parentElement ? refFor(n.parentElement) : undefined;
    } catch (e) {
      return undefined;
    }
  }
  var DOM_OBSERVE = {
    subtree: true,
    childList: true,
    characterData: true,
    characterDataOldValue: true,
    attributes: true,
    attributeOldValue: true,
    attributeFilter: ATTRS
  };
  function installDom() {
    if (!N.MutationObserver) return;
    var pending = [];
    var scheduled = false;
    var pendingCap = 20000,
      overflowRecords = 0;
    var mo = new N.MutationObserver(function (rs) {
      if (document.readyState === 'loading') return; // the parser building the initial page is not a change
      if (pending.length + rs.length > pendingCap) {
        overflowRecords += rs.length;
        return;
      }
      for (var i = 0; i < rs.length; i++) N.push(pending, rs[i]);
      if (!scheduled) {
        scheduled = true;
        var fired = false;
        var run = function () {
          if (fired) return;
          fired = true;
          scheduled = false;
          processDom();
        };
        N.raf(run);
        N.setTimeout(run, 100); // rAF does not run in background tabs
      }
    });
    function processDom() {
      var rs = pending;
      pending = [];
      var f = domFrame();
      try {
        for (var i = 0; i < rs.length; i++) domRecord(f, rs[i]);
      } catch (e) {
        internal('dom_observer', e);
      }
      if (domTruncated(f, overflowRecords)) overflowRecords = 0;
    }
    N.observe(mo, document, DOM_OBSERVE);
    var watch = function (root) {
      N.observe(mo, root, DOM_OBSERVE);
    };
    N.push(ROOT_WATCHERS, watch);
    N.push(S.teardowns, function () {
      N.disconnect(mo);
      ROOT_WATCHERS = N.filter(ROOT_WATCHERS, function (w) {
        return w !== watch;
      });
    });
  }
  function installShadowCapture() {
    var proto = window.Element && window.Element.prototype;
    if (!proto || !proto.attachShadow) return;
    patch(proto, 'attachShadow', function (orig) {
      return function () {
        var root = N.apply(orig, this, arguments);
        try {
          N.set(SHADOWS, this, root);
          noteShadowRoot(root);
        } catch (e) {
          /* ignore */
        }
        return root;
      };
    });
    // roots that already exist and are open
    try {
      var all = N.querySelectorAll(document, '*');
      for (var i = 0; i < all.length && i < 20000; i++)
        if (all[i].shadowRoot) noteShadowRoot(all[i].shadowRoot);
    } catch (e) {
      /* ignore */
    }
  }

  // -- animations
  function installAnimations() {
    var allow = rateCap('anim', 200);
    function h(kind) {
      return function (e) {
        var t = e.target;
        if (!t || t.nodeType !== 1 || isIgnored(t) || !allow()) return;
        var isTr = N.test(/^transition/, e.type);
        var d = {
          name: isTr ? e.propertyName : e.animationName,
          kind: isTr ? 'transition' : 'animation',
          target: label(t),
          elapsedTime: e.elapsedTime
        };
        if (e.type === 'animationcancel' || e.type === 'transitioncancel') d.cancelled = true;
        emit(kind, d, t);
      };
    }
    listen(document, 'animationstart', h('anim.start'), true);
    listen(document, 'animationend', h('anim.end'), true);
    listen(document, 'animationcancel', h('anim.end'), true);
    listen(document, 'transitionstart', h('anim.start'), true);
    listen(document, 'transitionend', h('anim.end'), true);
    listen(document, 'transitioncancel', h('anim.end'), true);
  }

