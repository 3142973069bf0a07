  // == Section: semantics == role, name, visibility, states
  // provides: INPUT_ROLES, TAG_ROLES, getRole, INTERACTIVE, NAME_FROM_CONTENT, CONTAINER_ROLES, textOf,
  //   ownText, labelsText, byIdText, getName, styleOf, makeVisCache, isVisible, isDisabled, isChecked,
  //   isFocused, isSecretField, getValue, statesOf, describe, label, LANDMARKS, landmarkOf, candidate,
  //   candidateText, wordsOf, nearMisses
  // uses: N (01), REDACTED (01), clip (03), isObj (03), keySensitive (03), norm (03), scrub (03),
  //   SKIP_TAGS (06), isIgnored (06), refFor (06), allElements (08)
  // ---- semantics: role, name, visibility, states ----------------------------------------------
  var INPUT_ROLES = {
    checkbox: 'checkbox',
    radio: 'radio',
    range: 'slider',
    number: 'spinbutton',
    submit: 'button',
    button: 'button',
    reset: 'button',
    image: 'button',
    search: 'searchbox'
  };
  var TAG_ROLES = {
    BUTTON: 'button',
    TEXTAREA: 'textbox',
    UL: 'list',
    OL: 'list',
    LI: 'listitem',
    NAV: 'navigation',
    MAIN: 'main',
    ASIDE: 'complementary',
    DIALOG: 'dialog',
    IMG: 'img',
    TABLE: 'table',
    FORM: 'form',
    P: 'paragraph',
    H1: 'heading',
    H2: 'heading',
    H3: 'heading',
    H4: 'heading',
    H5: 'heading',
    H6: 'heading',
    OPTION: 'option',
    PROGRESS: 'progressbar',
    METER: 'meter',
    TR: 'row',
    TD: 'cell',
    TH: 'columnheader',
    THEAD: 'rowgroup',
    TBODY: 'rowgroup',
    TFOOT: 'rowgroup',
    FIELDSET: 'group',
    DETAILS: 'group',
    SUMMARY: 'button',
    ARTICLE: 'article',
    OUTPUT: 'status',
    HR: 'separator',
    MENU: 'list',
    DL: 'list',
    DT: 'term',
    DD: 'definition',
    SEARCH: 'search',
    IFRAME: 'iframe'
  };
  function getRole(el) {
    var r = el.getAttribute && N.getAttribute(el, 'role');
    if (r && N.trim(r)) return N.toLowerCase(N.split(N.trim(r), /\s+/)[0]);
    var tag = el.tagName;
    if (tag === 'A' || tag === 'AREA') return N.hasAttribute(el, 'href') ? 'link' : 'generic';
    if (tag === 'INPUT') {
      var t = N.toLowerCase(N.getAttribute(el, 'type') || 'text');
      if (t === 'hidden') return 'none';
      if (t === 'file') return 'button';
      if (t === 'search') return 'searchbox';
      if (INPUT_ROLES[t]) return INPUT_ROLES[t];
      if (N.hasAttribute(el, 'list')) return 'combobox';
      return 'textbox';
    }
    if (tag === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
    if (tag === 'HEADER')
      return N.closest(el, 'article,aside,main,nav,section') ? 'generic' : 'banner';
    if (tag === 'FOOTER')
      return N.closest(el, 'article,aside,main,nav,section') ? 'generic' : 'contentinfo';
    if (tag === 'SECTION')
      return N.hasAttribute(el, 'aria-label') || N.hasAttribute(el, 'aria-labelledby')
        ? 'region'
        : 'generic';
    if (tag === 'IMG' && N.getAttribute(el, 'alt') === '') return 'presentation';
    if (el.isContentEditable && N.getAttribute(el, 'contenteditable') !== null) return 'textbox';
    return TAG_ROLES[tag] || 'generic';
  }
  var INTERACTIVE = {
    button: 1,
    link: 1,
    textbox: 1,
    searchbox: 1,
    checkbox: 1,
    radio: 1,
    combobox: 1,
    listbox: 1,
    slider: 1,
    spinbutton: 1,
    switch: 1,
    tab: 1,
    menuitem: 1,
    menuitemcheckbox: 1,
    menuitemradio: 1,
    option: 1,
    treeitem: 1
  };
  var NAME_FROM_CONTENT = {
    button: 1,
    link: 1,
    checkbox: 1,
    radio: 1,
    switch: 1,
    tab: 1,
    option: 1,
    menuitem: 1,
    menuitemcheckbox: 1,
    menuitemradio: 1,
    treeitem: 1,
    cell: 1,
    gridcell: 1,
    row: 1,
    rowheader: 1,
    columnheader: 1,
    heading: 1,
    listitem: 1,
    tooltip: 1,
    status: 1,
    alert: 1,
    term: 1,
    legend: 1
  };
  var CONTAINER_ROLES = {
    list: 1,
    listbox: 1,
    grid: 1,
    table: 1,
    tree: 1,
    treegrid: 1,
    dialog: 1,
    alertdialog: 1,
    navigation: 1,
    main: 1,
    banner: 1,
    form: 1,
    search: 1,
    menu: 1,
    menubar: 1,
    tablist: 1,
    region: 1,
    complementary: 1,
    contentinfo: 1
  };

  // Readable text: collapsed text that skips aria-hidden and never-rendered tags (script, style,
  // template, noscript...). `skip` is an element left out with its subtree (the control a label
  // names); a nested select or textarea counts as its current value, never as all its options.
  function textOf(node, depth, skip) {
    if (depth > 30) return '';
    var out = '';
    for (var c = node.firstChild; c; c = c.nextSibling) {
      if (c.nodeType === 3) out += c.data;
      else if (c.nodeType === 1) {
        if (SKIP_TAGS[c.tagName] || N.getAttribute(c, 'aria-hidden') === 'true' || c.hidden) continue;
        if (c === skip) continue;
        if (c.tagName === 'SELECT') {
          var so = c.selectedOptions && c.selectedOptions[0];
          out += ' ' + (so ? so.label || so.textContent : '') + ' ';
          continue;
        }
        if (c.tagName === 'TEXTAREA') continue;
        if (c.tagName === 'IMG') {
          out += ' ' + (N.getAttribute(c, 'alt') || '') + ' ';
          continue;
        }
        if (c.tagName === 'INPUT' && N.test(/^(submit|button|reset)$/i, c.type)) {
          out += ' ' + c.value + ' ';
          continue;
        }
        if (c.tagName === 'BR') {
          out += ' ';
          continue;
        }
        out += ' ' + textOf(c, depth + 1, skip) + ' ';
      }
    }
    return out;
  }
  function ownText(el) {
    var s = '';
    for (var c = el.firstChild; c; c = c.nextSibling) if (c.nodeType === 3) s += c.data;
    if (el.tagName === 'INPUT' && N.test(/^(submit|button|reset)$/i, el.type)) s += ' ' + el.value;
    return norm(s);
  }
  function labelsText(el) {
    var out = [];
    try {
      if (el.labels && el.labels.length)
        for (var i = 0; i < el.labels.length; i++) N.push(out, norm(textOf(el.labels[i], 0, el)));
    } catch (e) {
      /* not labelable */
    }
    return N.filter(out, Boolean);
  }
  function byIdText(el, attr) {
    var ids = N.trim(N.getAttribute(el, attr) || '');
    if (!ids) return '';
    var root = el.getRootNode ? N.getRootNode(el) : document;
    var parts = N.map(N.split(ids, /\s+/), function (id) {
      var n = root.getElementById ? N.getElementById(root, id) : N.getElementById(document, id);
      if (!n) return '';
      return N.getAttribute(n, 'aria-label') || textOf(n, 0, el);
    });
    return norm(N.join(parts, ' '));
  }
  function getName(el, role) {
    try {
      role = role || getRole(el);
      var n = byIdText(el, 'aria-labelledby');
      if (n) return n;
      n = norm(N.getAttribute(el, 'aria-label'));
      if (n) return n;
      var tag = el.tagName;
      if (tag === 'IMG' || tag === 'AREA' || (tag === 'INPUT' && el.type === 'image')) {
        n = norm(N.getAttribute(el, 'alt'));
        if (n) return n;
      }
      if (
        tag === 'INPUT' ||
        tag === 'TEXTAREA' ||
        tag === 'SELECT' ||
        tag === 'METER' ||
        tag === 'PROGRESS' ||
        tag === 'OUTPUT'
      ) {
        var lt = labelsText(el);
        if (lt.length) return N.join(lt, ' ');
        if (tag === 'INPUT' && N.test(/^(submit|button|reset)$/i, el.type)) {
          n = norm(
            el.value || (el.type === 'submit' ? 'Submit' : el.type === 'reset' ? 'Reset' : '')
          );
          if (n) return n;
        }
        if (tag !== 'SELECT') {
          n = norm(N.getAttribute(el, 'placeholder'));
          if (n) return n;
        }
      }
      if (tag === 'FIELDSET') {
        var lg = N.querySelector(el, 'legend');
        if (lg) {
          n = norm(textOf(lg, 0));
          if (n) return n;
        }
      }
      if (tag === 'TABLE') {
        var cap = N.querySelector(el, 'caption');
        if (cap) {
          n = norm(textOf(cap, 0));
          if (n) return n;
        }
      }
      if (tag === 'DIALOG' || role === 'dialog' || role === 'alertdialog') {
        var hd = N.querySelector(el, 'h1,h2,h3,h4,h5,h6,[role=heading]');
        if (hd) {
          n = norm(textOf(hd, 0));
          if (n) return clip(n, 120);
        }
      }
      if (NAME_FROM_CONTENT[role]) {
        n = norm(textOf(el, 0));
        if (n) return clip(n, 200);
      }
      n = norm(N.getAttribute(el, 'title'));
      return n || '';
    } catch (e) {
      return '';
    }
  }
  function styleOf(el) {
    try {
      return N.getComputedStyle(el.ownerDocument.defaultView || window, el);
    } catch (e) {
      return null;
    }
  }
  function makeVisCache() {
    return new Map();
  }
  function isVisible(el, cache) {
    if (!el || !el.isConnected) return false;
    var chain = [];
    var cur = el,
      result = true;
    while (cur && cur.nodeType === 1) {
      if (cache && N.has(cache, cur)) {
        result = N.get(cache, cur);
        break;
      }
      N.push(chain, cur);
      if (N.getAttribute(cur, 'aria-hidden') === 'true' || cur.hidden) {
        result = false;
        break;
      }
      var st = styleOf(cur);
      if (
        st &&
        (st.display === 'none' ||
          st.visibility === 'hidden' ||
          st.visibility === 'collapse' ||
          st.opacity === '0')
      ) {
        result = false;
        break;
      }
      var p = cur.parentNode;
      if (p && p.nodeType === 11 && p.host) p = p.host; // shadow root -> host
      if (
        !p &&
        cur.ownerDocument &&
        cur.ownerDocument.defaultView &&
        cur.ownerDocument.defaultView.frameElement
      ) {
        try {
          p = cur.ownerDocument.defaultView.frameElement;
        } catch (e) {
          p = null;
        }
      }
      cur = p;
    }
    if (cache) for (var i = 0; i < chain.length; i++) N.set(cache, chain[i], result);
    return result;
  }
  function isDisabled(el) {
    try {
      if (el.disabled === true) return true;
      if (N.getAttribute(el, 'aria-disabled') === 'true') return true;
      var fs = el.closest && N.closest(el, 'fieldset[disabled]');
      if (fs && N.test(/^(INPUT|BUTTON|SELECT|TEXTAREA)$/, el.tagName)) {
        var lg = N.querySelector(fs, 'legend');
        if (!(lg && N.contains(lg, el))) return true;
      }
    } catch (e) {
      /* ignore */
    }
    return false;
  }
  function isChecked(el) {
    if (el.tagName === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio'))
      return !!el.checked;
    var a =
      N.getAttribute(el, 'aria-checked') ||
      N.getAttribute(el, 'aria-pressed') ||
      N.getAttribute(el, 'aria-selected');
    return a === 'true' || a === 'mixed';
  }
  function isFocused(el) {
    try {
      var root = el.getRootNode ? N.getRootNode(el) : document;
      return root.activeElement === el;
    } catch (e) {
      return false;
    }
  }
  function isSecretField(el) {
    try {
      if (el.tagName === 'INPUT' && (el.type === 'password' || el.type === 'hidden')) return true;
      var ac = N.toLowerCase(N.getAttribute(el, 'autocomplete') || '');
      if (N.test(/(current-password|new-password|cc-number|cc-csc|one-time-code)/, ac)) return true;
      var keys = [
        N.getAttribute(el, 'name'),
        el.id,
        N.getAttribute(el, 'data-testid'),
        N.getAttribute(el, 'aria-label')
      ];
      for (var i = 0; i < keys.length; i++) if (keys[i] && keySensitive(keys[i])) return true;
    } catch (e) {
      /* ignore */
    }
    return false;
  }
  function getValue(el) {
    var tag = el.tagName,
      v = null;
    if (tag === 'INPUT') {
      var t = el.type;
      if (
        t === 'checkbox' ||
        t === 'radio' ||
        t === 'submit' ||
        t === 'button' ||
        t === 'reset' ||
        t === 'image'
      )
        return null;
      if (t === 'file') {
        try {
          v = N.join(N.map(el.files || [], function (f) {
              return f.name;
            }), ', ');
        } catch (e) {
          v = '';
        }
      } else v = el.value;
    } else if (tag === 'TEXTAREA') v = el.value;
    else if (tag === 'SELECT') {
      try {
        v = N.join(N.map(N.filter(el.options, function (o) {
            return o.selected;
          }), function (o) {
            return norm(o.label || o.text);
          }), ', ');
      } catch (e) {
        v = el.value;
      }
    } else {
      v = N.getAttribute(el, 'aria-valuenow');
      if (v == null && el.isContentEditable && N.getAttribute(el, 'contenteditable') !== null)
        v = norm(el.textContent);
    }
    if (v == null || v === '') return null;
    if (isSecretField(el)) return REDACTED;
    return clip(scrub(String(v)), 200);
  }
  function statesOf(el, cache) {
    var st = ['present'];
    var vis = isVisible(el, cache);
    N.push(st, vis ? 'visible' : 'hidden');
    N.push(st, isDisabled(el) ? 'disabled' : 'enabled');
    if (isChecked(el)) N.push(st, 'checked');
    if (N.getAttribute(el, 'aria-expanded') === 'true' || (el.tagName === 'DETAILS' && el.open))
      N.push(st, 'expanded');
    if (isFocused(el)) N.push(st, 'focused');
    return st;
  }
  function describe(el, cache) {
    var role = getRole(el),
      name = getName(el, role);
    var d = {
      ref: refFor(el),
      role: role,
      name: name,
      states: statesOf(el, cache),
      visible: isVisible(el, cache)
    };
    var v = getValue(el);
    if (v != null) d.value = v;
    var text = norm(textOf(el, 0));
    if (text && text !== name) d.text = clip(text, 80);
    var tid = N.getAttribute(el, 'data-testid');
    if (tid) d.testid = tid;
    try {
      var src = N.closest(el, '[data-reticle-source]');
      if (src) d.source = N.join(N.slice(N.split(N.getAttribute(src, 'data-reticle-source'), ':'), 0, 2), ':');
    } catch (e) {
      /* ignore */
    }
    return d;
  }
  function label(el) {
    if (!el || el.nodeType !== 1) return null;
    var role = getRole(el),
      name = getName(el, role);
    return role + (name ? ' "' + clip(name, 60) + '"' : '') + ' (' + refFor(el) + ')';
  }
  var LANDMARKS = {
    navigation: 1,
    main: 1,
    banner: 1,
    contentinfo: 1,
    complementary: 1,
    form: 1,
    dialog: 1,
    alertdialog: 1,
    region: 1,
    search: 1
  };
  // The nearest landmark around el (crossing shadow roots) as 'role "name"', or 'page'.
  function landmarkOf(el) {
    var cur = el.parentNode;
    for (var i = 0; cur && i < 200; i++) {
      if (cur.nodeType === 11 && cur.host) cur = cur.host;
      if (!cur || cur.nodeType !== 1) break;
      var r = getRole(cur);
      if (LANDMARKS[r]) {
        var nm = getName(cur, r);
        return r + (nm ? ' "' + clip(nm, 40) + '"' : '');
      }
      cur = cur.parentNode;
    }
    return 'page';
  }
  // One candidate of an ambiguous or near-missed target: ref, role, name and landmark.
  function candidate(el) {
    var role = getRole(el);
    return {
      ref: refFor(el),
      role: role,
      name: clip(getName(el, role), 80),
      landmark: landmarkOf(el)
    };
  }
  function candidateText(c) {
    return c.ref + ' ' + c.role + (c.name ? ' "' + c.name + '"' : '') + ' in ' + c.landmark;
  }
  function wordsOf(s) {
    return N.filter(N.split(N.toLowerCase(norm(s)), /[^\p{L}\p{N}]+/u), function (w) {
        return w.length > 1;
      });
  }
  // Up to `max` elements near a query that found nothing: same role, or a name/text that shares a
  // substring or words with what was asked, best first.
  function nearMisses(q, root, max) {
    var want = q.by === 'role' ? q.name : q.value;
    var wantText = isObj(want) ? want.contains || want.equals || want.matches || '' : want;
    wantText = N.toLowerCase(norm(wantText == null ? '' : String(wantText)));
    var words = wordsOf(wantText);
    var role = q.by === 'role' ? N.toLowerCase(norm(q.value)) : null;
    var scored = [];
    var all = allElements(root || document.body || document.documentElement, 5000);
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (isIgnored(el)) continue;
      var r = getRole(el);
      var nm = getName(el, r);
      var text = nm || ownText(el);
      if (!text && r === 'generic') continue;
      var low = N.toLowerCase(text),
        score = 0;
      if (role && r === role) score += 2;
      if (wantText && low && (N.indexOf(low, wantText) >= 0 || N.indexOf(wantText, low) >= 0)) score += 3;
      else if (words.length && low) {
        var lw = wordsOf(low);
        for (var w = 0; w < words.length; w++) if (N.indexOf(lw, words[w]) >= 0) score += 1;
      }
      if (q.by === 'label' || q.by === 'placeholder') {
        if (!N.test(/^(INPUT|TEXTAREA|SELECT)$/, el.tagName)) continue;
        var ph = N.toLowerCase(norm(N.getAttribute(el, 'placeholder') || ''));
        if (ph && wantText && (N.indexOf(ph, wantText) >= 0 || N.indexOf(wantText, ph) >= 0)) score += 3;
        score += 1;
      }
      if (score >= (role ? 2 : 1)) N.push(scored, { el: el, score: score, i: i });
    }
    N.sort(scored, function (a, b) {
      return b.score - a.score || a.i - b.i;
    });
    return N.map(N.slice(scored, 0, max || 5), function (x) {
      return candidate(x.el);
    });
  }

