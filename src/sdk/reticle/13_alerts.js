  // == Section: alerts == alerts, live regions, invalid fields, toasts
  // provides: TOASTS, ALERT_TEXT_CAP, ALERT_SAME_MS, ALERT_MAX_CANDIDATES, ALERT_RESCAN, ALERT_SOURCES,
  //   CONVENTIONS, FAILURE_UI, PLAIN_FAILURE, PLAIN_YES, PLAIN_NO, PLAIN_SUCCESS, TEXT_WATCH, TEXT_WATCH_MS,
  //   readsAsFailure, deniesFailure, emitFound, ownTexts, textWatchArm, textWatchAnswered, POSTED_KEY,
  //   POSTED_MS, typedIn, rememberPostedForm, postedForms, postedFormScan, FORM_MARKERS, FORM_CHROME,
  //   MARK_TEXT_MAX, redirectedHere, formCameBack, MARK_CONTROL, MARK_BADGE, MARK_WORDS, markOf,
  //   failureWords, saysSuccess, echoesInput, textWatchCollect, textWatchGone, textScope, textWatchScan,
  //   textWatchMarks, ROUTE_ANNOUNCERS, isAnnouncer, ALERT_SCOPES, ALERT_CHROME, ALERT_NOW, declareToasts,
  //   ERROR_LOOK, fieldErrorText, alertRows, alertCandidates, alertsShown, alertText, renderedBy,
  //   componentOf, withRenderer, alertScan, alertsGone, ALERT_OBSERVE, installAlerts, alertsRead
  // uses: CONFIG (01), N (01), clip (03), hasOwn (03), isObj (03), norm (03), redactUrl (03), scrub (03),
  //   ssGet (03), ssSet (03), warn (03), S (04), emit (04), internal (04), SKIP_TAGS (06), isIgnored (06),
  //   refFor (06), resolveRef (06), byIdText (07), getName (07), isVisible (07), makeVisCache (07),
  //   textOf (07), ROOT_WATCHERS (08), liveShadowRoots (08), listen (11), rateCap (11), cleanStack (14),
  //   checkFrames (18)
  // -- what the user is told: alerts, assertive live regions, invalid fields, declared toasts
  // ui.alert {text, source, level, ref, initial?, field?} (ui.status for a status surface of the
  // daemon's FAILURE_UI table, whose text decides) when such an element appears, becomes
  // visible, or its text changes to a new non-empty text; one element is reported once per text,
  // the same text from two places within ALERT_SAME_MS once, at most 20 a second.
  var TOASTS = { error: [], info: [] }; // selectors declared through reticle.describe({toasts})
  var ALERT_TEXT_CAP = 300;
  var ALERT_SAME_MS = 1500;
  var ALERT_MAX_CANDIDATES = 200;
  var ALERT_RESCAN = null; // set by installAlerts: rescan now (after describe)
  var ALERT_SOURCES = [
    // [source, selector, level]; earlier rows win when one candidate sits inside another
    ['alertdialog', '[role=alertdialog]', null],
    ['alert', '[role=alert]', null],
    ['assertive', '[aria-live=assertive]', null]
  ];
  // the daemon's table of the ways frameworks tell failure (_FAILURE_UI): [source, selector, level];
  // level 'error' rows rank above the ARIA rows, the rest (status regions: text decides) below them
  var CONVENTIONS = (CONFIG && CONFIG.conventions) || {};
  var FAILURE_UI = CONVENTIONS.failureUi || [];
  // -- plain failure text: what appears after an act in the act's form, or in what the act's answer
  // updated, and reads as a failure (the daemon's _PLAIN_FAILURE table), as ui.alert source 'text'
  var PLAIN_FAILURE = CONVENTIONS.plainFailure || [[], []];
  var PLAIN_YES = N.map(PLAIN_FAILURE[0], function (s) {
    return new RegExp(s, 'i');
  });
  var PLAIN_NO = N.map(PLAIN_FAILURE[1], function (s) {
    return new RegExp(s, 'i');
  });
  // words of success on a page (the daemon's _PLAIN_SUCCESS): a posted form that came back saying one saved
  var PLAIN_SUCCESS = N.map(CONVENTIONS.plainSuccess || [], function (s) {
    return new RegExp(s, 'i');
  });
  // armed by a click, press or submit: {form, t0, until, before, added, answered, typed, shown, gone, marks}
  var TEXT_WATCH = null;
  var TEXT_WATCH_MS = 15000;
  function readsAsFailure(t) {
    return (
      N.some(PLAIN_YES, function (re) {
        return N.test(re, t);
      }) && !deniesFailure(t)
    );
  }
  // "No errors", "0 problems", "required fields are marked": a text that says there is no failure
  function deniesFailure(t) {
    return N.some(PLAIN_NO, function (re) {
      return N.test(re, t);
    });
  }
  // a message found on the page: its ref and the component that rendered it, as ui.alert
  function emitFound(d, el) {
    var r = refFor(el);
    if (r) d.ref = r;
    emit('ui.alert', withRenderer(d, el), el);
  }
  // the texts an element shows, one per element with text of its own (at most 300 elements)
  function ownTexts(root, out, budget) {
    var all = root.querySelectorAll ? N.querySelectorAll(root, '*') : [];
    var els = N.concat([root], N.slice(all, 0, N.min(300, budget ? budget.left : 300)));
    if (budget) budget.left -= els.length;
    N.forEach(els, function (el) {
      if (el.nodeType !== 1 || SKIP_TAGS[el.tagName]) return;
      var own = '';
      for (var n = el.firstChild; n; n = n.nextSibling) if (n.nodeType === 3) own += n.nodeValue;
      own = norm(own);
      if (own) N.push(out, { el: el, text: clip(own, ALERT_TEXT_CAP) });
    });
    return out;
  }
  function textWatchArm(el, action) {
    if (N.indexOf(['click', 'dblclick', 'press', 'submit'], action) < 0 || !PLAIN_YES.length) return;
    var form = el.form || (el.closest ? N.closest(el, 'form') : null);
    var before = new Set();
    if (form)
      N.forEach(ownTexts(form, []), function (x) {
        N.add(before, x.text);
      });
    TEXT_WATCH = { form: form, t0: N.now(), until: N.now() + TEXT_WATCH_MS, before: before, added: [], answered: 0,
      typed: typedIn(form), shown: new Set(before), gone: new Set(), goneBudget: { left: 300 }, marks: new Set() };
  }
  // a response to a request has come (its headers, before the page can swap its body in: htmx swaps in the
  // XHR's load, before its loadend): what changes from now on may be what an answer carried
  function textWatchAnswered() {
    if (TEXT_WATCH && !TEXT_WATCH.answered) TEXT_WATCH.answered = N.now();
  }
  // -- a form post's answer: when the page a form post brings holds that form again (the same id or
  // action), what it shows in it that the form did not show before is read as a client-side re-render
  // of the form would be (a classic site re-renders its form under 200 with "Title must be at least 2
  // characters.")
  var POSTED_KEY = '__reticle_posted_form';
  var POSTED_MS = 120000;
  function typedIn(form) {
    var typed = []; // what the person typed is echoed back (a new todo "Fix the failing test"), not a message
    var fields = form && form.elements ? form.elements : [];
    for (var i = 0; i < fields.length && typed.length < 50; i++) {
      var v = typeof fields[i].value === 'string' ? norm(fields[i].value) : '';
      if (v.length >= 3 && fields[i].type !== 'password' && fields[i].type !== 'hidden') N.push(typed, v);
    }
    return typed;
  }
  function rememberPostedForm(form) {
    try {
      var texts = N.map(ownTexts(form, []), function (x) {
        return x.text;
      });
      var method = N.toLowerCase(String(N.getAttribute(form, 'method') || 'get'));
      ssSet(POSTED_KEY, N.stringify({ at: N.dateNow(), id: form.id || '', action: form.action || '', method: method,
        texts: N.slice(texts, 0, 100), typed: N.map(typedIn(form), function (v) {
          return clip(v, 200);
        }) }));
    } catch (e) {
      /* no sessionStorage: the arriving page is read as it is */
    }
  }
  function postedForms(prev) {
    return N.filter(document.forms || [], function (f) {
      return (prev.id && f.id === prev.id) || (!!prev.action && f.action === prev.action);
    });
  }
  function postedFormScan(al) {
    var prev = null;
    try {
      prev = N.parse(ssGet(POSTED_KEY) || 'null');
    } catch (e) {
      prev = null;
    }
    if (!isObj(prev)) return;
    ssSet(POSTED_KEY, '');
    if (N.dateNow() - (prev.at || 0) > POSTED_MS || !N.isArray(prev.texts)) return;
    var before = new Set(N.map(prev.texts, String));
    var w = { typed: N.isArray(prev.typed) ? N.map(prev.typed, String) : [] };
    var budget = { left: 600 };
    var back = postedForms(prev),
      said = 0;
    N.forEach(back, function (f) {
      N.forEach(ownTexts(f, [], budget), function (x) {
        if (N.has(before, x.text) || !readsAsFailure(x.text) || echoesInput(w, x.text) || N.has(al.texts, x.text))
          return;
        if (!isVisible(x.el, makeVisCache()) || isIgnored(x.el)) return;
        N.add(before, x.text);
        if (!al.allow()) return;
        said++;
        emitFound({ text: x.text, source: 'text', level: null, scope: 'form', related: true, initial: true }, x.el);
      });
    });
    N.forEach(al.texts, function () {
      said++; // a message the page shows (role=alert, a status, a field's error): it speaks for itself
    });
    if (back.length && prev.method === 'post' && !redirectedHere()) formCameBack(al, back[0], prev, w, said);
  }
  // -- a posted form that came back: the answer to the post was not a redirect and holds the same form
  // again.  Post/redirect/get is every server-rendered framework's way: success redirects, a failure
  // renders the form again, its error marked (a class with error/invalid/danger, Django's errorlist, a
  // field's aria-invalid, role=alert) above, inside or below it.  A mark is a failure shown (ui.alert,
  // level error); no mark and no word of success is ui.returned: the daemon will not call it a success.
  var FORM_MARKERS = '[class*="error" i],[class*="invalid" i],[class*="danger" i],[aria-invalid="true"],[role="alert"]';
  var FORM_CHROME = 'header,nav,footer,[role=banner],[role=navigation],[role=contentinfo]';
  var MARK_TEXT_MAX = 300; // longer is a region around a message, not the message
  function redirectedHere() {
    try {
      var nav = N.getEntriesByType(performance, 'navigation')[0];
      return !nav || nav.redirectCount > 0;
    } catch (e) {
      return true; // not known: read as today
    }
  }
  function formCameBack(al, form, prev, w, said) {
    var marked = [],
      vis = makeVisCache(),
      els = N.querySelectorAll(document.body || document, FORM_MARKERS);
    for (var i = 0; i < els.length && marked.length < 5; i++) {
      var el = els[i],
        field = N.test(/^(INPUT|TEXTAREA|SELECT)$/, el.tagName);
      // (a field with aria-invalid is reported already, with its own error text: source 'invalid')
      if (field && N.getAttribute(el, 'aria-invalid') === 'true') continue;
      if (N.contains(el, form) || !isVisible(el, vis) || isIgnored(el) || N.closest(el, FORM_CHROME)) continue;
      if (N.some(marked, function (m) {
        return N.contains(m, el) || N.contains(el, m);
      }))
        continue;
      var d = markOf(el, al, w);
      if (!d) continue;
      N.push(marked, el);
      if (!al.allow()) return;
      d.scope = 'page';
      d.initial = true;
      emitFound(d, el);
    }
    if (marked.length || said) return;
    // the texts of the page outside the form and the page's chrome: a word of success, or of failure
    var outside = N.filter(ownTexts(document.body || document.documentElement, [], { left: 600 }), function (x) {
      return !N.contains(form, x.el) && !N.closest(x.el, FORM_CHROME);
    });
    if (saysSuccess(outside) || failureWords(al, outside, w)) return;
    emit('ui.returned', { action: clip(redactUrl(prev.action || location.href), 500), id: clip(prev.id || '', 120) });
  }
  // a control styled as dangerous (a Delete button's btn-danger) or inside one, or a badge, pill, chip or tag
  // (by the element's own class): no message
  var MARK_CONTROL =
    'button,a[href],summary,[role=button],[role=link],[role=menuitem],[role=tab],' +
    'input[type=submit],input[type=button],input[type=reset],input[type=image]';
  var MARK_BADGE = /badge|pill|chip|(^|[\s_-])tags?($|[\s_-])/i;
  var MARK_WORDS = /[A-Za-z\u00C0-\u024F\u0370-\u1FFF\u3040-\uFFFF]{2}/; // a message has words ("-12.50" has none)
  // what a marked element says, as a ui.alert's data (source 'invalid' for a field, else 'marker'), or null: a
  // control, badge or tag; no words; a region too long to be one message; a message reported already; the
  // person's words; "No errors"; or a table cell only coloured as "danger" (a negative amount is data)
  function markOf(el, al, w) {
    var cls = N.getAttribute(el, 'class') || '';
    if (N.closest(el, MARK_CONTROL) || N.test(MARK_BADGE, cls)) return null;
    if (!N.test(/error|invalid/i, cls) && N.closest(el, 'td,th')) return null;
    var field = N.test(/^(INPUT|TEXTAREA|SELECT)$/, el.tagName);
    var name = field ? clip(getName(el) || el.name || '?', 120) : null,
      text = field
        ? clip(scrub(fieldErrorText(el)), MARK_TEXT_MAX + 1) || 'the field ' + name + ' is marked invalid'
        : clip(scrub(norm(textOf(el, 0))), MARK_TEXT_MAX + 1);
    if (!text || text.length > MARK_TEXT_MAX || !N.test(MARK_WORDS, text) || N.has(al.texts, text)) return null;
    if (!field && echoesInput(w, text)) return null;
    if (!field && deniesFailure(text)) return null; // <div class="errors">No errors</div>
    var d = { text: text, source: field ? 'invalid' : 'marker', level: 'error', related: true };
    if (field) d.field = name;
    return d;
  }
  // no mark, but text outside the form that reads as a failure (the Flask tutorial's <div class="flash">Username
  // is required.</div> above the form it rendered again): a failure shown
  function failureWords(al, outside, w) {
    var said = 0,
      vis = makeVisCache();
    N.forEach(outside, function (x) {
      if (said >= 3 || x.text.length > MARK_TEXT_MAX) return;
      if (!readsAsFailure(x.text) || echoesInput(w, x.text) || N.has(al.texts, x.text)) return;
      if (!isVisible(x.el, vis) || isIgnored(x.el) || !al.allow()) return;
      said++;
      emitFound({ text: x.text, source: 'text', level: null, scope: 'returned', related: true, initial: true }, x.el);
    });
    return said > 0;
  }
  // a word of success outside the form ("Note saved.")
  function saysSuccess(outside) {
    return N.some(outside, function (x) {
      return N.some(PLAIN_SUCCESS, function (re) {
        return N.test(re, x.text);
      });
    });
  }
  function echoesInput(w, text) {
    return N.some(w.typed, function (v) {
      return N.indexOf(text, v) >= 0;
    });
  }
  function textWatchCollect(recs) {
    var w = TEXT_WATCH;
    if (!w || N.now() > w.until) return;
    for (var i = 0; i < recs.length && w.added.length < 50; i++) {
      var r = recs[i];
      var node = r.type === 'characterData' ? r.target.parentElement : null;
      if (node) N.push(w.added, { el: node, t: N.now() });
      if (r.type !== 'childList') continue;
      for (var g = 0; g < r.removedNodes.length && w.goneBudget.left > 0; g++) textWatchGone(w, r.removedNodes[g]);
      for (var j = 0; j < r.addedNodes.length && w.added.length < 50; j++) {
        var a = r.addedNodes[j];
        var host = a.nodeType === 1 ? a : a.parentElement;
        if (host) N.push(w.added, { el: host, t: N.now() });
      }
    }
  }
  // the texts a change took off the page (what a swap replaced): the same words put back are not new
  function textWatchGone(w, node) {
    if (node.nodeType === 3) {
      var t = norm(node.nodeValue || '');
      if (t) N.add(w.gone, clip(t, ALERT_TEXT_CAP));
      w.goneBudget.left--;
    } else if (node.nodeType === 1)
      N.forEach(ownTexts(node, [], w.goneBudget), function (x) {
        N.add(w.gone, x.text);
      });
  }
  // where new text sits: 'form' (the act's form, or the form that replaced it), 'answer' (anything
  // changed after the act's request answered), or null (not the act's)
  function textScope(w, el, t) {
    var f = w.form;
    if (f && f.isConnected && N.contains(f, el)) return 'form';
    var g = el.closest ? N.closest(el, 'form') : null;
    var sameAction = g && f && N.getAttribute(g, 'action') === N.getAttribute(f, 'action');
    if (f && !f.isConnected && g && ((f.id && g.id === f.id) || sameAction))
      return 'form';
    return w.answered && t >= w.answered ? 'answer' : null;
  }
  function textWatchScan(al) {
    var w = TEXT_WATCH;
    if (w && N.now() > w.until) TEXT_WATCH = w = null;
    if (!w || !w.added.length) return;
    var added = w.added;
    var budget = { left: 600 }; // elements read per scan, however much changed
    w.added = [];
    N.forEach(added, function (a) {
      if (budget.left <= 0 || !a.el.isConnected || isIgnored(a.el) || isAnnouncer(a.el)) return;
      var scope = textScope(w, a.el, a.t);
      if (!scope) return;
      textWatchMarks(w, al, a.el, scope);
      N.forEach(ownTexts(a.el, [], budget), function (x) {
        if (N.has(w.before, x.text) || N.has(w.marks, x.text) || !readsAsFailure(x.text) || echoesInput(w, x.text))
          return;
        if (!isVisible(x.el, makeVisCache())) return;
        // a message the alert scan reports already (an ARIA alert, a toast, a status) is not reported twice
        if (N.has(al.texts, x.text)) return;
        for (var i = 0; i < al.live.length; i++) if (N.contains(al.live[i].el, x.el)) return;
        N.add(w.before, x.text); // once per text
        if (!al.allow()) return;
        var d = { text: x.text, source: 'text', level: null, scope: scope, related: true };
        if (scope === 'answer' && N.has(w.gone, x.text)) d.again = true; // it only took the place of itself
        emitFound(d, x.el);
      });
    });
  }
  // An element marked as an error (FORM_MARKERS: a class with error, invalid or danger, ...) in what changed
  // after the act: the marked element it went into (a swap into <div class="errors">), the changed element, or
  // what it holds; the outermost of nested marks.  `again`: its text was shown before the act, in the act's form
  // or in what the change replaced.  The daemon reads a new one in the act's form as an error shown, and any
  // other only where the act's own answer carried it (its text is in that answer's body).  Once per text per act.
  function textWatchMarks(w, al, el, scope) {
    var around = el.parentElement ? N.closest(el.parentElement, FORM_MARKERS) : null;
    var found = N.concat(around ? [around] : [], N.matches(el, FORM_MARKERS) ? [el] : [],
      N.slice(N.querySelectorAll(el, FORM_MARKERS), 0, 20));
    var vis = makeVisCache(),
      taken = [];
    N.forEach(found, function (m) {
      if (N.getAttribute(m, 'aria-invalid') === 'true' && N.test(/^(INPUT|TEXTAREA|SELECT)$/, m.tagName)) return;
      if (!isVisible(m, vis) || isIgnored(m) || isAnnouncer(m)) return;
      if (N.some(taken, function (t) {
        return N.contains(t, m) || N.contains(m, t);
      }))
        return;
      for (var i = 0; i < al.live.length; i++) if (N.contains(al.live[i].el, m)) return;
      var d = markOf(m, al, w);
      if (!d) return;
      N.push(taken, m);
      if (N.has(w.marks, d.text) || !al.allow()) return;
      N.add(w.marks, d.text);
      d.scope = scope;
      if (N.has(w.gone, d.text) || N.has(w.shown, d.text)) d.again = true;
      emitFound(d, m);
    });
  }
  // the daemon's table of route announcers (_ROUTE_ANNOUNCERS): a router's hidden live region, never a message
  var ROUTE_ANNOUNCERS = CONVENTIONS.routeAnnouncers || '';
  function isAnnouncer(el) {
    try {
      return !!(ROUTE_ANNOUNCERS && el.closest && N.closest(el, ROUTE_ANNOUNCERS));
    } catch (e) {
      return false;
    }
  }
  var ALERT_SCOPES =
    'header,[role=banner],nav,[role=navigation],footer,[role=contentinfo],aside,[role=complementary],' +
    'form,[role=form],dialog,[role=dialog],[role=alertdialog]';
  var ALERT_CHROME = 'header,[role=banner],nav,[role=navigation],footer,[role=contentinfo],aside,[role=complementary]';
  var ALERT_NOW = null; // set by installAlerts: what is shown now, for alerts_read
  function declareToasts(t) {
    if (!t || typeof t !== 'object') return;
    N.forEach(['error', 'info'], function (level) {
      var v = t[level];
      N.forEach(N.isArray(v) ? v : v ? [v] : [], function (sel) {
        if (typeof sel !== 'string' || !sel || N.indexOf(TOASTS[level], sel) >= 0) return;
        try {
          N.querySelector(document, sel);
        } catch (e) {
          warn('describe: toast selector ' + clip(sel, 200) + ' does not parse; ignored');
          return;
        }
        if (TOASTS[level].length < 20) N.push(TOASTS[level], sel);
      });
    });
    if (ALERT_RESCAN) ALERT_RESCAN();
  }
  // the error text of an invalid field: aria-errormessage, aria-describedby, else an error-looking
  // element next to it (or next to its label or wrapper)
  var ERROR_LOOK = /(^|[\s_-])(error|errors|invalid|danger|feedback|help-block|errorlist)([\s_-]|$)/i;
  function fieldErrorText(el) {
    var t = byIdText(el, 'aria-errormessage') || byIdText(el, 'aria-describedby');
    if (t) return t;
    var cur = el;
    for (var up = 0; up < 3 && cur && cur !== document.body; up++) {
      for (var sib = cur.nextElementSibling, k = 0; sib && k < 3; sib = sib.nextElementSibling, k++) {
        var look = (N.getAttribute(sib, 'class') || '') + ' ' + (sib.id || '');
        if (N.getAttribute(sib, 'role') === 'alert' || N.test(ERROR_LOOK, look)) {
          var x = norm(textOf(sib, 0));
          if (x) return x;
        }
      }
      cur = cur.parentElement;
    }
    return '';
  }
  // The selectors an alert scan looks at, best first: [source, selector, level, status?].
  function alertRows() {
    var rows = [];
    N.forEach(TOASTS.error, function (sel) {
      N.push(rows, ['toast', sel, 'error']);
    });
    N.forEach(TOASTS.info, function (sel) {
      N.push(rows, ['toast', sel, null]);
    });
    N.push(rows, ['invalid', '[aria-invalid=true]', 'error']);
    return N.concat(rows, N.filter(FAILURE_UI, function (r) {
        return r[2] === 'error';
      }),
      ALERT_SOURCES,
      N.map(N.filter(FAILURE_UI, function (r) {
        return r[2] !== 'error';
      }), function (r) {
        return [r[0], r[1], null, true]; // a status surface: reported as ui.status, its text decides
      }));
  }
  // The elements that may tell the user something, each once, at most ALERT_MAX_CANDIDATES.
  function alertCandidates() {
    var rows = alertRows();
    var out = [],
      seen = new Set(),
      roots = N.concat([document], liveShadowRoots()); // a design system's toast lives in a shadow tree
    for (var i = 0; i < rows.length && out.length < ALERT_MAX_CANDIDATES; i++) {
      for (var r = 0; r < roots.length && out.length < ALERT_MAX_CANDIDATES; r++) {
        var els;
        try {
          els = N.querySelectorAll(roots[r], rows[i][1]);
        } catch (e) {
          break;
        }
        for (var j = 0; j < els.length && out.length < ALERT_MAX_CANDIDATES; j++) {
          if (N.has(seen, els[j])) continue;
          N.add(seen, els[j]);
          N.push(out, { el: els[j], source: rows[i][0], level: rows[i][2], status: !!rows[i][3] });
        }
      }
    }
    return out;
  }
  // The candidates shown now, one per message; SHOWN learns the hidden and the nested ones.
  function alertsShown(SHOWN) {
    var cache = makeVisCache();
    var showing = [];
    N.forEach(alertCandidates(), function (c) {
      var el = c.el;
      if (isIgnored(el) || isAnnouncer(el) || !isVisible(el, cache)) {
        N.set(SHOWN, el, '');
        return;
      }
      if (!alertText(c)) {
        N.set(SHOWN, el, '');
        return;
      }
      // a candidate inside (or around) one that ranks higher is the same message; a field is
      // not a message, so a dialog around an invalid field still counts
      for (var i = 0; i < showing.length; i++) {
        var o = showing[i].el;
        if (c.source === 'invalid' || showing[i].source === 'invalid') continue;
        if (N.contains(o, el) || N.contains(el, o)) {
          N.set(SHOWN, el, c.key);
          return;
        }
      }
      N.push(showing, c);
    });
    return showing;
  }
  // Sets the candidate's text and key (an invalid field: its name and error text); false when empty.
  function alertText(c) {
    var el = c.el;
    if (c.source === 'invalid') {
      c.field = clip(getName(el) || N.getAttribute(el, 'name') || el.id || '', 120);
      c.text = clip(scrub(fieldErrorText(el)), ALERT_TEXT_CAP);
      c.key = 'invalid\n' + c.field + '\n' + c.text;
      return true;
    }
    // a huge region is read natively (innerText of a rendered element skips script/style)
    var big = (el.textContent || '').length > 20000;
    c.text = clip(scrub(norm(big ? el.innerText || '' : textOf(el, 0))), ALERT_TEXT_CAP);
    c.key = c.text;
    return !!c.text;
  }
  // The component that rendered a message, where the framework's development build marks it: Vue's
  // component (type.__file from its SFC compiler), Svelte's __svelte_meta.loc, React's fiber (the
  // owner's name; React 19's _debugStack, the element's creation stack, which the daemon maps like any
  // other stack; React 18's _debugSource).  Up to 12 ancestors are asked; a production build marks
  // none, and nothing is said.
  function renderedBy(el) {
    for (var n = el, i = 0; n && n.nodeType === 1 && i < 12; n = n.parentElement, i++) {
      try {
        var out = componentOf(n);
        if (out) return out;
      } catch (e) {
        return null;
      }
    }
    return null;
  }
  function componentOf(n) {
    var vue = n.__vueParentComponent;
    if (vue && vue.type) {
      var vt = vue.type;
      var vname = String(vt.__name || vt.name || '');
      var vfile = vt.__file ? clip(String(vt.__file), 300) : undefined;
      if (vfile || vname) return { component: clip(vname, 80), componentAt: vfile };
    }
    var loc = n.__svelte_meta && n.__svelte_meta.loc;
    if (loc && loc.file) {
      // Svelte 4 counts lines from 0 (and gives `char`), Svelte 5 from 1
      var line = loc.line != null ? Number(loc.line) + (loc.char != null ? 1 : 0) : null;
      return { componentAt: clip(String(loc.file), 300) + (line != null ? ':' + line : '') };
    }
    var key = N.filter(N.keys(n), function (k) {
      return N.indexOf(k, '__reactFiber$') === 0;
    })[0];
    if (!key) return null;
    var f = n[key];
    var owner = f && f._debugOwner;
    var rname = owner && owner.type ? owner.type.displayName || owner.type.name : owner && owner.name;
    var out = rname ? { component: clip(String(rname), 80) } : {};
    if (f && f._debugStack && f._debugStack.stack) out.componentStack = cleanStack(String(f._debugStack.stack));
    else if (f && f._debugSource && f._debugSource.fileName)
      out.componentAt = clip(String(f._debugSource.fileName), 300) + ':' + Number(f._debugSource.lineNumber || 0);
    return out.component || out.componentAt || out.componentStack ? out : null;
  }
  function withRenderer(d, el) {
    var r = renderedBy(el);
    if (r)
      N.forEach(N.keys(r), function (k) {
        if (r[k] !== undefined) d[k] = r[k];
      });
    return d;
  }
  // One scan: a ui.alert (or ui.status) for each message shown with a new text.
  function alertScan(al, initial) {
    al.scheduled = false;
    var showing = alertsShown(al.SHOWN);
    var t = N.now(),
      recent = al.recent;
    N.forEach(showing, function (c) {
      if (N.get(al.SHOWN, c.el) === c.key) return;
      N.set(al.SHOWN, c.el, c.key);
      if (c.text && recent[c.text] && t - recent[c.text] < ALERT_SAME_MS) return;
      if (!al.allow()) return;
      if (c.text) recent[c.text] = t;
      var d = { text: c.text, source: c.source, level: c.level };
      if (c.field != null) d.field = c.field;
      var r = refFor(c.el);
      if (r) d.ref = r;
      if (initial) d.initial = true;
      emit(c.status ? 'ui.status' : 'ui.alert', withRenderer(d, c.el), c.el);
    });
    alertsGone(al, showing, t);
    if (initial) postedFormScan(al);
    textWatchScan(al);
    // a new document says it has looked: a verdict after a navigation waits for this
    if (initial) emit('ui.scan', { shown: showing.length });
    for (var k in recent) if (hasOwn(recent, k) && t - recent[k] > ALERT_SAME_MS) delete recent[k];
    checkFrames(); // a frame mounted later (a payment form, a sign-in box) is a part we cannot read
  }
  // A message reported before that is no longer shown (removed, hidden, or its text replaced): ui.gone,
  // so a toast shown and gone before a check still counts as shown, and the answer says when it went.
  function alertsGone(al, showing, t) {
    var still = new Map();
    al.texts = new Set();
    N.forEach(showing, function (c) {
      N.set(still, c.el, c.text);
      N.add(al.texts, c.text);
    });
    al.live = N.filter(al.live, function (x) {
      if (N.get(still, x.el) === x.text) return true;
      emit('ui.gone', { text: x.text, source: x.source, shownMs: N.round(t - x.t) });
      return false;
    });
    N.forEach(showing, function (c) {
      if (!c.text || c.source === 'invalid' || al.live.length >= 50) return;
      for (var i = 0; i < al.live.length; i++) if (al.live[i].el === c.el) return;
      N.push(al.live, { el: c.el, text: c.text, source: c.source, t: t });
    });
  }
  var ALERT_OBSERVE = {
    subtree: true,
    childList: true,
    characterData: true,
    attributes: true,
    attributeFilter: [
      'role',
      'aria-live',
      'aria-invalid',
      'aria-hidden',
      'aria-describedby',
      'aria-errormessage',
      'hidden',
      'style',
      'class',
      'open'
    ]
  };
  function installAlerts() {
    if (!N.MutationObserver || !document.querySelectorAll) return;
    var al = {
      SHOWN: new WeakMap(), // element -> the text last reported ('' while hidden or empty)
      recent: {}, // text -> when it was last reported
      live: [], // the messages shown at the last scan: {el, text, source, t}
      texts: new Set(), // their texts, and those of the fields marked invalid
      allow: rateCap('ui.alert', 20),
      scheduled: false,
      loaded: false
    };
    function schedule() {
      if (al.scheduled || !al.loaded) return;
      al.scheduled = true;
      var fired = false;
      var run = function () {
        if (fired) return;
        fired = true;
        safeScan(false);
      };
      N.raf(run);
      N.setTimeout(run, 100); // rAF does not run in background tabs
    }
    var mo = new N.MutationObserver(function (recs) {
      try {
        if (TEXT_WATCH) textWatchCollect(recs);
      } catch (e) {
        internal('text_watch', e);
      }
      schedule();
    });
    N.observe(mo, document, ALERT_OBSERVE);
    var watch = function (root) {
      N.observe(mo, root, ALERT_OBSERVE);
      schedule();
    };
    N.push(ROOT_WATCHERS, watch);
    function first() {
      if (al.loaded) return;
      al.loaded = true;
      safeScan(true);
    }
    function safeScan(initial) {
      try {
        alertScan(al, initial);
      } catch (e) {
        internal('alert_observer', e);
      }
    }
    if (document.readyState === 'loading') listen(document, 'DOMContentLoaded', first);
    else N.setTimeout(first, 0);
    listen(document, 'transitionend', schedule, true); // a toast that fades in
    listen(document, 'animationend', schedule, true);
    ALERT_RESCAN = schedule;
    ALERT_NOW = function () {
      return alertsShown(al.SHOWN);
    };
    N.push(S.teardowns, function () {
      N.disconnect(mo);
      ALERT_RESCAN = null;
      ALERT_NOW = null;
      ROOT_WATCHERS = N.filter(ROOT_WATCHERS, function (w) {
        return w !== watch;
      });
    });
  }
  // alerts_read {ref?}: every message shown now ({text, source, level, field?, ref, related}); related:
  // it sits in no other region than the element `ref` (the act's target): not in a header, nav,
  // footer, aside, form or dialog that does not hold that element
  function alertsRead(args) {
    if (!ALERT_NOW) return { alerts: [], unavailable: true };
    var target = resolveRef(args && args.ref);
    var out = N.map(N.slice(ALERT_NOW(), 0, 50), function (c) {
      var scope = null;
      try {
        scope = c.el.parentElement ? N.closest(c.el.parentElement, ALERT_SCOPES) : null;
        if (!scope && N.matches(c.el, ALERT_SCOPES) && c.source !== 'alertdialog') scope = c.el;
      } catch (e) {
        scope = null;
      }
      var d = { text: c.text, source: c.source, level: c.level, related: !scope };
      // beside the act's target, only its own region; with no target, any region but the page's chrome
      if (scope) d.related = target ? N.contains(scope, target) : !N.matches(scope, ALERT_CHROME);
      d.own = !!(scope && target && N.contains(scope, target)); // in the act's own form or region
      d.scoped = !!scope; // in a form, dialog or landmark at all (a toast portal at the body's foot is not)
      if (c.field != null) d.field = c.field;
      var r = refFor(c.el);
      if (r) d.ref = r;
      return withRenderer(d, c.el);
    });
    return { alerts: out };
  }

