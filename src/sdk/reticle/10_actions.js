  // == Section: actions == synthetic and CDP input, act, act_sequence
  // provides: ACTIONS, DANGER, DANGER_ACTIONS, dangerContext, dangerCheck, focusableAncestor, centre,
  //   viewOf, mouseInit, fireMouse, plain, sleep, frame, doClick, nativeSetter, setValue, fireInput,
  //   assertEditable, richWrite, focusToWrite, doFill, keyCode, KEYCODES, keyEvent, doType, doClear,
  //   doSelect, doCheck, parseMods, doPress, doHover, doFocus, doBlur, doSubmit, doUpload, doDrag,
  //   resolveTarget, settle, CDP_INPUT, INPUT_WAITS, inputSeq, cdpInput, onInputResult, SYNTHETIC_ACTIONS,
  //   HYDRATE_ACT_MS, HYDRATE_OPEN_MS, winHas, reactFiber, HYDRATION, hydrationRow, hydrationPending,
  //   whenHydrated, hydratedCmd, FILLED, FILL_ACTIONS, fillsNoted, SUBMITTING, fillsReset, act, actNow,
  //   actElement, actOptions, actBefore, actFocused, actPointer, actProbe, actTally, actProbeEnd,
  //   actEffectAfter, actAnswer, actSequence
  // uses: N (01), clip (03), coded (03), errMsg (03), hasOwn (03), isObj (03), norm (03), S (04),
  //   rawSend (04), isIgnored (06), mustResolve (06), refFor (06), candidate (07), candidateText (07),
  //   getName (07), getRole (07), isChecked (07), isDisabled (07), isFocused (07), isVisible (07),
  //   label (07), makeVisCache (07), nearMisses (07), textOf (07), resolveScope (08), normalizeQuery (09),
  //   occlusion (09), runQuery (09), zeroHint (09), textWatchArm (13), docAnnounced (15)
  // ---- actions -------------------------------------------------------------------------------
  var ACTIONS = [
    'click',
    'dblclick',
    'hover',
    'focus',
    'blur',
    'fill',
    'type',
    'clear',
    'select',
    'check',
    'uncheck',
    'submit',
    'press',
    'scrollIntoView',
    'upload',
    'drag'
  ];
  var DANGER = new RegExp(
    '\\b(delete|remove|destroy|erase|drop|terminate|revoke|reset|logout|log out|sign ?out|close account|' +
      'cancel subscription|purchase|buy|pay|payment|place order|confirm order|send money|send funds|transfer|' +
      'withdraw|refund|deploy|publish|wipe|unsubscribe)\\b',
    'i'
  );
  var DANGER_ACTIONS = { click: 1, dblclick: 1, check: 1, uncheck: 1, drag: 1, submit: 1 };
  function dangerContext(el) {
    var parts = [
      getName(el),
      clip(norm(el.textContent), 300),
      N.getAttribute(el, 'title'),
      N.getAttribute(el, 'aria-label'),
      N.getAttribute(el, 'href')
    ];
    if (el.tagName === 'INPUT' || el.tagName === 'BUTTON') N.push(parts, el.value);
    var form = el.form || (el.tagName === 'FORM' ? el : null);
    if (form) N.push(parts, N.getAttribute(form, 'action'));
    if (el.tagName === 'FORM') {
      var subs = N.querySelectorAll(el, 'button[type=submit],button:not([type]),input[type=submit]');
      for (var i = 0; i < subs.length && i < 5; i++) N.push(parts, getName(subs[i]));
    }
    return N.replace(N.join(N.filter(parts, function (p) {
        return p;
      }), ' | '), /[_-]/g, ' ');
  }
  function dangerCheck(el, action, args) {
    var gated =
      DANGER_ACTIONS[action] ||
      (action === 'press' && N.test(/^enter$/i, String(args.key || args.text || 'Enter')));
    if (!gated || args.confirmDangerous === true) return;
    var ctx = dangerContext(el);
    if (action === 'drag' && args.__toEl) ctx += ' | ' + dangerContext(args.__toEl);
    var m = N.exec(DANGER, ctx);
    if (m) {
      throw new Error(
        'potentially destructive action blocked; retry with args.confirmDangerous=true. The ' +
          action +
          ' target ' +
          label(el) +
          " matches '" +
          N.toLowerCase(m[1]) +
          "' (a destructive word in its name, text, value, href or form action); " +
          'pass args:{confirmDangerous:true} only if the user asked for this.'
      );
    }
  }
  function focusableAncestor(el) {
    for (var c = el; c && c.nodeType === 1; c = c.parentElement) {
      if (
        c.tabIndex >= 0 ||
        N.test(/^(INPUT|SELECT|TEXTAREA|BUTTON)$/, c.tagName) ||
        (c.tagName === 'A' && N.hasAttribute(c, 'href')) ||
        c.isContentEditable
      )
        return c;
    }
    return null;
  }
  function centre(el) {
    var b = N.getBoundingClientRect(el);
    return { x: b.left + b.width / 2, y: b.top + b.height / 2, w: b.width, h: b.height };
  }
  function viewOf(el) {
    return (el.ownerDocument && el.ownerDocument.defaultView) || window;
  }
  function mouseInit(el, c, extra) {
    var o = {
      bubbles: true,
      cancelable: true,
      composed: true,
      view: viewOf(el),
      clientX: c.x,
      clientY: c.y,
      screenX: c.x,
      screenY: c.y,
      button: 0,
      buttons: 0,
      detail: 1
    };
    if (extra) for (var k in extra) if (hasOwn(extra, k)) o[k] = extra[k];
    return o;
  }
  function fireMouse(el, type, c, extra) {
    var W = viewOf(el);
    var init = mouseInit(el, c, extra);
    var ev;
    if (N.test(/^pointer/, type) && W.PointerEvent) {
      init.pointerId = 1;
      init.pointerType = 'mouse';
      init.isPrimary = true;
      init.width = 1;
      init.height = 1;
      init.pressure = init.buttons ? 0.5 : 0;
      ev = new W.PointerEvent(type, init);
    } else {
      ev = new W.MouseEvent(N.test(/^pointer/, type) ? N.replace(type, 'pointer', 'mouse') : type, init);
    }
    N.dispatchEvent(el, ev);
    return ev;
  }
  function plain(el, type, bubbles, cancelable) {
    var W = viewOf(el);
    var ev = new W.Event(type, {
      bubbles: bubbles !== false,
      cancelable: !!cancelable,
      composed: true
    });
    N.dispatchEvent(el, ev);
    return ev;
  }
  function sleep(ms) {
    return new N.Promise(function (r) {
      N.setTimeout(r, ms);
    });
  }
  function frame() {
    return new N.Promise(function (r) {
      N.raf(function () {
        r();
      });
    });
  }
  function doClick(el, args) {
    var c = centre(el);
    var prev = document.activeElement;
    var pd = fireMouse(el, 'pointerdown', c, { buttons: 1, relatedTarget: prev });
    var md = fireMouse(el, 'mousedown', c, { buttons: 1 });
    if (!md.defaultPrevented && !pd.defaultPrevented) {
      var f = focusableAncestor(el);
      if (f && f !== document.activeElement) {
        try {
          N.focus(f, { preventScroll: true });
        } catch (e) {
          /* ignore */
        }
      }
    }
    var finish = function () {
      fireMouse(el, 'pointerup', c, {});
      fireMouse(el, 'mouseup', c, {});
      return fireMouse(el, 'click', c, {});
    };
    var hold = N.min(30000, N.max(0, Number(args.holdMs) || 0));
    if (hold > 0) {
      var t0 = N.now();
      return N.then(sleep(hold), function () {
        var ev = finish();
        return { defaultPrevented: ev.defaultPrevented, heldMs: N.round(N.now() - t0) };
      });
    }
    return { defaultPrevented: finish().defaultPrevented };
  }
  function nativeSetter(el, prop) {
    var W = viewOf(el);
    var proto =
      el.tagName === 'TEXTAREA'
        ? W.HTMLTextAreaElement.prototype
        : el.tagName === 'SELECT'
          ? W.HTMLSelectElement.prototype
          : W.HTMLInputElement.prototype;
    var d = N.descOf(proto, prop);
    return d && d.set;
  }
  function setValue(el, v) {
    var set = nativeSetter(el, 'value');
    if (set) N.call(set, el, v);
    else el.value = v;
  }
  function fireInput(el, data, inputType) {
    var W = viewOf(el);
    var ev;
    try {
      ev = new W.InputEvent('input', {
        bubbles: true,
        cancelable: false,
        composed: true,
        data: data == null ? null : data,
        inputType: inputType || 'insertText'
      });
    } catch (e) {
      ev = new W.Event('input', { bubbles: true, composed: true });
    }
    N.dispatchEvent(el, ev);
  }
  function assertEditable(el, action) {
    if (el.isContentEditable) return 'rich';
    if (el.tagName !== 'INPUT' && el.tagName !== 'TEXTAREA')
      throw new Error(
        'cannot ' +
          action +
          ' a <' +
          N.toLowerCase(el.tagName) +
          '> (' +
          label(el) +
          '); ' +
          action +
          ' works on input, textarea and contenteditable elements' +
          (el.tagName === 'SELECT' ? '; use action "select"' : '')
      );
    if (
      el.tagName === 'INPUT' &&
      N.test(/^(checkbox|radio|file|submit|button|reset|image|range|color)$/, el.type)
    ) {
      if (el.type === 'range' || el.type === 'color') return 'plain';
      throw new Error(
        'cannot ' +
          action +
          ' an input of type ' +
          el.type +
          (el.type === 'file'
            ? '; use action "upload"'
            : N.test(/checkbox|radio/, el.type)
              ? '; use check/uncheck'
              : '; use click')
      );
    }
    if (el.disabled) throw new Error('cannot ' + action + ' ' + label(el) + ': it is disabled');
    if (el.readOnly) throw new Error('cannot ' + action + ' ' + label(el) + ': it is read-only');
    return 'plain';
  }
  function richWrite(el, text, replace) {
    N.focus(el);
    var sel = N.getSelection(viewOf(el));
    var range = N.createRange(el.ownerDocument);
    N.selectNodeContents(range, el);
    if (!replace) N.collapse(range, false);
    N.removeAllRanges(sel);
    N.addRange(sel, range);
    var ok = false;
    try {
      ok = N.execCommand(el.ownerDocument, text ? 'insertText' : 'delete', false, text);
    } catch (e) {
      ok = false;
    }
    if (!ok) {
      if (replace) el.textContent = text;
      else el.textContent += text;
      fireInput(el, text, 'insertText');
    }
  }
  // Focus an editable element for `action`; a rich editor takes `text` at once (then true).
  function focusToWrite(el, action, text, replace) {
    var kind = assertEditable(el, action);
    if (document.activeElement !== el) {
      try {
        N.focus(el, { preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    if (kind !== 'rich') return false;
    richWrite(el, text, replace);
    return true;
  }
  function doFill(el, args) {
    var v = args.value != null ? args.value : args.text;
    if (typeof v === 'number') v = String(v);
    if (typeof v !== 'string')
      throw new Error('fill needs a string value: pass args:{value:"\u2026"}');
    if (el.tagName === 'SELECT') return doSelect(el, { value: v });
    if (focusToWrite(el, 'fill', v, true)) return {};
    setValue(el, v);
    fireInput(el, v, 'insertReplacementText');
    plain(el, 'change', true, false);
    return {};
  }
  function keyCode(key) {
    if (N.test(/^[a-z]$/i, key)) return 'Key' + N.toUpperCase(key);
    if (N.test(/^[0-9]$/, key)) return 'Digit' + key;
    if (key === ' ') return 'Space';
    if (
      N.test(
        /^(Enter|Escape|Tab|Backspace|Delete|Home|End|PageUp|PageDown|ArrowUp|ArrowDown|ArrowLeft|ArrowRight|Insert|F\d{1,2})$/,
        key
      )
    )
      return key;
    return '';
  }
  var KEYCODES = {
    Enter: 13,
    Escape: 27,
    Tab: 9,
    Backspace: 8,
    Delete: 46,
    ' ': 32,
    ArrowUp: 38,
    ArrowDown: 40,
    ArrowLeft: 37,
    ArrowRight: 39,
    Home: 36,
    End: 35,
    PageUp: 33,
    PageDown: 34
  };
  function keyEvent(el, type, key, code, mods) {
    var W = viewOf(el);
    var kc = KEYCODES[key] || (key.length === 1 ? N.charCodeAt(N.toUpperCase(key), 0) : 0);
    var ev = new W.KeyboardEvent(type, {
      key: key,
      code: code,
      bubbles: true,
      cancelable: true,
      composed: true,
      view: W,
      ctrlKey: !!mods.ctrl,
      shiftKey: !!mods.shift,
      altKey: !!mods.alt,
      metaKey: !!mods.meta,
      keyCode: kc,
      which: kc,
      charCode: type === 'keypress' ? kc : 0
    });
    N.dispatchEvent(el, ev);
    return ev;
  }
  function doType(el, args) {
    var text = args.text != null ? args.text : args.value;
    if (typeof text === 'number') text = String(text);
    if (typeof text !== 'string') throw new Error('type needs a string: pass args:{text:"\u2026"}');
    if (focusToWrite(el, 'type', text, false)) return {};
    if (text.length > 500) {
      setValue(el, el.value + text);
      fireInput(el, text, 'insertText');
      plain(el, 'change', true, false);
      return { perKey: false };
    }
    for (var i = 0; i < text.length; i++) {
      var ch = N.charAt(text, i);
      var kd = keyEvent(el, 'keydown', ch, keyCode(ch), {});
      if (kd.defaultPrevented) {
        keyEvent(el, 'keyup', ch, keyCode(ch), {});
        continue;
      }
      keyEvent(el, 'keypress', ch, keyCode(ch), {});
      var cur = el.value,
        start = cur.length,
        end = cur.length;
      try {
        if (typeof el.selectionStart === 'number' && el.selectionStart != null) {
          start = el.selectionStart;
          end = el.selectionEnd;
        }
      } catch (e) {
        /* type without selection */
      }
      var maxLen = el.maxLength;
      if (maxLen >= 0 && cur.length - (end - start) >= maxLen) {
        keyEvent(el, 'keyup', ch, keyCode(ch), {});
        continue;
      }
      setValue(el, N.slice(cur, 0, start) + ch + N.slice(cur, end));
      try {
        N.setSelectionRange(el, start + 1, start + 1);
      } catch (e) {
        /* email/number inputs */
      }
      fireInput(el, ch, 'insertText');
      keyEvent(el, 'keyup', ch, keyCode(ch), {});
    }
    plain(el, 'change', true, false);
    return {};
  }
  function doClear(el) {
    var kind = assertEditable(el, 'clear');
    if (document.activeElement !== el) {
      try {
        N.focus(el, { preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    if (kind === 'rich') {
      richWrite(el, '', true);
      return {};
    }
    setValue(el, '');
    fireInput(el, null, 'deleteContentBackward');
    plain(el, 'change', true, false);
    return {};
  }
  function doSelect(el, args) {
    if (el.tagName !== 'SELECT')
      throw new Error(
        'select works on a <select>; ' +
          label(el) +
          ' is a <' +
          N.toLowerCase(el.tagName) +
          '>' +
          (getRole(el) === 'combobox'
            ? ' (a custom combobox: click it, then click the option)'
            : '')
      );
    if (el.disabled) throw new Error('cannot select in ' + label(el) + ': it is disabled');
    var wanted =
      args.values ||
      (N.isArray(args.value) ? args.value : [args.value != null ? args.value : args.label]);
    if (wanted[0] == null)
      throw new Error('select needs args:{value:"\u2026"} (an option value or its visible label)');
    var opts = N.slice(el.options);
    var picks = N.map(wanted, function (w) {
      w = String(w);
      var o =
        N.filter(opts, function (x) {
          return x.value === w;
        })[0] ||
        N.filter(opts, function (x) {
          return norm(x.label || x.text) === norm(w);
        })[0] ||
        N.filter(opts, function (x) {
          return N.toLowerCase(norm(x.label || x.text)) === N.toLowerCase(norm(w));
        })[0];
      if (!o)
        throw new Error(
          "no option '" +
            clip(w, 80) +
            "' in " +
            label(el) +
            '; options: ' +
            N.join(N.map(N.slice(opts, 0, 20), function (x) {
                return (
                  N.stringify(x.value) +
                  (norm(x.text) !== x.value ? ' (' + clip(norm(x.text), 40) + ')' : '')
                );
              }), ', ') +
            (opts.length > 20 ? ', \u2026' : '')
        );
      if (o.disabled)
        throw new Error("option '" + clip(w, 80) + "' in " + label(el) + ' is disabled');
      return o;
    });
    if (document.activeElement !== el) {
      try {
        N.focus(el, { preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    if (el.multiple)
      N.forEach(opts, function (o) {
        o.selected = N.indexOf(picks, o) >= 0;
      });
    else setValue(el, picks[0].value);
    if (!el.multiple && el.selectedIndex < 0) el.selectedIndex = N.indexOf(opts, picks[0]);
    plain(el, 'input', true, false);
    plain(el, 'change', true, false);
    return {};
  }
  function doCheck(el, want, args) {
    if (el.tagName === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) {
      if (el.disabled)
        throw new Error(
          'cannot ' + (want ? 'check ' : 'uncheck ') + label(el) + ': it is disabled'
        );
      if (!want && el.type === 'radio')
        throw new Error('cannot uncheck a radio button; check another option in its group instead');
      if (el.checked === want) return { alreadyAtValue: true, skipped: true };
      return doClick(el, args);
    }
    var role = getRole(el);
    if (
      role === 'checkbox' ||
      role === 'switch' ||
      role === 'radio' ||
      role === 'menuitemcheckbox' ||
      role === 'option'
    ) {
      if (isChecked(el) === want) return { alreadyAtValue: true, skipped: true };
      return doClick(el, args);
    }
    throw new Error(
      'cannot ' +
        (want ? 'check ' : 'uncheck ') +
        label(el) +
        ': it is not a checkbox, radio or switch'
    );
  }
  function parseMods(m) {
    var out = {};
    N.forEach(N.isArray(m) ? m : m ? [m] : [], function (x) {
      x = N.toLowerCase(String(x));
      if (N.test(/^(meta|cmd|command|super|win)$/, x)) out.meta = true;
      else if (N.test(/^(ctrl|control)$/, x)) out.ctrl = true;
      else if (x === 'shift') out.shift = true;
      else if (N.test(/^(alt|option|opt)$/, x)) out.alt = true;
    });
    return out;
  }
  function doPress(el, args) {
    var key = args.key || args.text || 'Enter';
    key = String(key);
    var lk = N.toLowerCase(key);
    var alias = {
      enter: 'Enter',
      escape: 'Escape',
      esc: 'Escape',
      tab: 'Tab',
      backspace: 'Backspace',
      delete: 'Delete',
      space: ' ',
      up: 'ArrowUp',
      down: 'ArrowDown',
      left: 'ArrowLeft',
      right: 'ArrowRight',
      arrowup: 'ArrowUp',
      arrowdown: 'ArrowDown',
      arrowleft: 'ArrowLeft',
      arrowright: 'ArrowRight',
      home: 'Home',
      end: 'End',
      pageup: 'PageUp',
      pagedown: 'PageDown'
    };
    if (alias[lk]) key = alias[lk];
    var code = args.code || keyCode(key);
    var mods = parseMods(args.modifiers);
    var kd = keyEvent(el, 'keydown', key, code, mods);
    var extra = {};
    if (!kd.defaultPrevented) {
      if (key.length === 1 || key === 'Enter') keyEvent(el, 'keypress', key, code, mods);
      // default actions a browser would perform for a trusted key
      if (key === 'Enter' && !mods.ctrl && !mods.meta) {
        if (el.tagName === 'INPUT' && el.form && !N.test(/^(button|checkbox|radio|file)$/, el.type)) {
          try {
            el.form.requestSubmit ? N.requestSubmit(el.form) : N.submit(el.form);
            extra.implicitSubmit = true;
          } catch (e) {
            extra.implicitSubmitError = errMsg(e);
          }
        } else if (
          (el.tagName === 'BUTTON' ||
            (el.tagName === 'A' && N.hasAttribute(el, 'href')) ||
            getRole(el) === 'button') &&
          el.tagName !== 'TEXTAREA'
        ) {
          N.click(el);
          extra.activated = true;
        }
      }
    }
    keyEvent(el, 'keyup', key, code, mods);
    if (
      key === ' ' &&
      !kd.defaultPrevented &&
      (el.tagName === 'BUTTON' ||
        (el.tagName === 'INPUT' && N.test(/^(checkbox|radio|button|submit)$/, el.type)))
    ) {
      N.click(el);
      extra.activated = true;
    }
    extra.defaultPrevented = kd.defaultPrevented;
    return extra;
  }
  function doHover(el, args) {
    var c = centre(el);
    fireMouse(el, 'pointerover', c, {});
    fireMouse(el, 'mouseover', c, {});
    fireMouse(el, 'pointerenter', c, { bubbles: false });
    fireMouse(el, 'mouseenter', c, { bubbles: false });
    fireMouse(el, 'pointermove', c, {});
    fireMouse(el, 'mousemove', c, {});
    var hold = N.min(30000, N.max(0, Number(args.holdMs) || 0));
    if (hold) {
      var t0 = N.now();
      return N.then(sleep(hold), function () {
        return { heldMs: N.round(N.now() - t0) };
      });
    }
    return {};
  }
  function doFocus(el) {
    var fired = false;
    var l = function () {
      fired = true;
    };
    N.addEventListener(el, 'focusin', l, true);
    try {
      N.focus(el);
    } finally {
      N.removeEventListener(el, 'focusin', l, true);
    }
    if (!fired) {
      plain(el, 'focus', false, false);
      plain(el, 'focusin', true, false);
    }
    return { focused: isFocused(el) };
  }
  function doBlur(el) {
    var was = isFocused(el);
    if (was) N.blur(el);
    else {
      plain(el, 'blur', false, false);
      plain(el, 'focusout', true, false);
    }
    return {};
  }
  function doSubmit(el) {
    var form = el.tagName === 'FORM' ? el : el.form || N.closest(el, 'form');
    if (!form)
      throw new Error(
        'submit: ' + label(el) + ' is not inside a <form>; click its submit button instead'
      );
    var prevented = null;
    var W = viewOf(form);
    var l = function (e) {
      prevented = e.defaultPrevented;
    };
    N.addEventListener(W, 'submit', l, false);
    try {
      var submitter =
        (el.tagName === 'BUTTON' || el.tagName === 'INPUT') &&
        el.form === form &&
        N.test(/submit|image/, el.type)
          ? el
          : undefined;
      if (form.requestSubmit) N.requestSubmit(form, submitter);
      else if (plain(form, 'submit', true, true).defaultPrevented === false) N.submit(form);
    } finally {
      N.removeEventListener(W, 'submit', l, false);
    }
    return { defaultPrevented: prevented === true };
  }
  function doUpload(el, args) {
    if (el.tagName !== 'INPUT' || el.type !== 'file')
      throw new Error('upload works on <input type=file>; ' + label(el) + ' is not one');
    if (el.disabled) throw new Error('cannot upload to ' + label(el) + ': it is disabled');
    var W = viewOf(el);
    var specs = N.isArray(args.files) ? args.files : [args];
    var dt = new W.DataTransfer();
    N.forEach(specs, function (f) {
      N.add(dt.items, new W.File(
          [f.content != null ? String(f.content) : 'reticle test file'],
          f.name || 'file.txt',
          { type: f.type || f.mime || 'text/plain' }
        ));
    });
    el.files = dt.files;
    plain(el, 'input', true, false);
    plain(el, 'change', true, false);
    return {
      files: N.map(specs, function (f) {
        return f.name || 'file.txt';
      })
    };
  }
  function doDrag(el, args) {
    var to = args.__toEl || el;
    var a = centre(el),
      b = centre(to);
    var W = viewOf(el);
    fireMouse(el, 'pointerdown', a, { buttons: 1 });
    fireMouse(el, 'mousedown', a, { buttons: 1 });
    var dt = null;
    try {
      dt = new W.DataTransfer();
      if (args.data)
        N.setData(dt, args.data.mime || 'text/plain',
          String(args.data.value != null ? args.data.value : ''));
    } catch (e) {
      dt = null;
    }
    var step = 0;
    function move() {
      step++;
      var p = { x: a.x + ((b.x - a.x) * step) / 5, y: a.y + ((b.y - a.y) * step) / 5 };
      var target = to;
      fireMouse(target, 'pointermove', p, { buttons: 1 });
      fireMouse(target, 'mousemove', p, { buttons: 1 });
      if (step < 5) return N.then(frame(), move);
      fireMouse(to, 'pointerup', b, {});
      fireMouse(to, 'mouseup', b, {});
      var prevented = false;
      if (el.draggable || N.getAttribute(el, 'draggable') === 'true' || args.html5) {
        var mk = function (t, tgt, p2) {
          var ev;
          try {
            ev = new W.DragEvent(t, {
              bubbles: true,
              cancelable: true,
              composed: true,
              clientX: p2.x,
              clientY: p2.y,
              dataTransfer: dt
            });
          } catch (e) {
            ev = new W.Event(t, { bubbles: true, cancelable: true });
          }
          N.dispatchEvent(tgt, ev);
          return ev;
        };
        mk('dragstart', el, a);
        mk('dragenter', to, b);
        mk('dragover', to, b);
        prevented = mk('drop', to, b).defaultPrevented;
        mk('dragend', el, b);
      }
      return { defaultPrevented: prevented, to: refFor(to) };
    }
    return N.then(frame(), move);
  }

  function resolveTarget(t) {
    if (!isObj(t))
      throw new Error(
        'target must be an object like {testid}, {text}, {role,name}, {label} or {placeholder}'
      );
    var q;
    try {
      q = normalizeQuery(t);
    } catch (e) {
      throw new Error('target ' + N.stringify(t) + ': ' + errMsg(e));
    }
    var r = runQuery({
      by: q.by,
      value: q.value,
      name: q.name != null ? q.name : t.name,
      scope: t.scope
    });
    var desc =
      q.by +
      ' ' +
      N.stringify(q.value) +
      (q.name != null ? ' name ' + N.stringify(q.name) : '');
    if (r.scopeMissing)
      throw new Error('target scope ' + N.stringify(t.scope) + ' matched nothing');
    var els = r.els;
    if (!els.length) {
      var h = zeroHint();
      var nearby = [];
      var near = nearMisses(q, resolveScope(t.scope));
      if (near.length) N.push(nearby, 'nearest: ' + N.join(N.map(near, candidateText), ', '));
      else if (q.by === 'role') {
        var same = N.map(N.slice(runQuery({ by: 'role', value: q.value, scope: t.scope })
          .els, 0, 8), function (e) {
            return N.stringify(getName(e));
          });
        if (same.length) N.push(nearby, q.value + 's present: ' + N.join(same, ', '));
      }
      if (h.presentTestids.length) N.push(nearby, 'testids present: ' + N.join(h.presentTestids, ', '));
      if (h.presentRegions.length)
        N.push(nearby, 'regions: ' +
            N.join(N.map(N.slice(h.presentRegions, 0, 5), function (x) {
                return x.role + (x.name ? ' "' + x.name + '"' : '');
              }), ', '));
      throw coded(
        'target_missing',
        'no element matches target ' +
          desc +
          ' on ' +
          h.route +
          (nearby.length ? '; ' + N.join(nearby, '; ') : '; take a snapshot to see what is there')
      );
    }
    if (els.length === 1) return els[0];
    var cache = makeVisCache();
    var vis = N.filter(els, function (e) {
      return isVisible(e, cache);
    });
    if (vis.length === 1) return vis[0];
    var pool = vis.length ? vis : els;
    var shown = N.map(N.slice(pool, 0, 8), candidate);
    throw coded(
      'target_ambiguous',
      pool.length +
        ' elements match target ' +
        desc +
        '; pass one of these refs instead' +
        (pool.length > shown.length ? ' (first ' + shown.length + ')' : '') +
        ': ' +
        N.join(N.map(shown, candidateText), '; ')
    );
  }

  function settle() {
    return N.then(N.resolve(), function () {
      return new N.Promise(function (resolve) {
        var done = false;
        var t = N.setTimeout(function () {
          if (!done) {
            done = true;
            resolve(false);
          }
        }, 200);
        N.raf(function () {
          if (!done) {
            done = true;
            N.clearTimeout(t);
            resolve(true);
          }
        });
      });
    });
  }

  // ---- real input in a device: the daemon dispatches it through CDP Input.* (isTrusted) ---------
  var CDP_INPUT = { click: 'click', dblclick: 'dblclick', hover: 'mousemove', type: 'keydown', press: 'keydown',
    drag: 'mouseup' };
  var INPUT_WAITS = {};
  var inputSeq = 0;
  function cdpInput(action, el, a) {
    if (action === 'type') assertEditable(el, 'type');
    if ((action === 'type' || action === 'press') && document.activeElement !== el) {
      try {
        N.focus(el, { preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    var c = centre(el),
      to = centre(a.__toEl || el);
    var req = { kind: 'input', id: 'i' + ++inputSeq, action: action, x: c.x, y: c.y, toX: to.x, toY: to.y };
    req.text = String(a.text != null ? a.text : a.value != null ? a.value : '');
    req.key = a.key || a.text || 'Enter';
    req.modifiers = N.isArray(a.modifiers) ? a.modifiers : [];
    req.holdMs = N.min(30000, N.max(0, Number(a.holdMs) || 0));
    var seen = null;
    var spy = function (e) {
      if (!seen) seen = e;
    };
    N.addEventListener(window, CDP_INPUT[action], spy, true);
    return new N.Promise(function (resolve, reject) {
      var timer = N.setTimeout(function () {
        finish({ ok: false, error: 'the daemon did not dispatch it in time' });
      }, 5000 + req.holdMs);
      function finish(msg) {
        N.clearTimeout(timer);
        delete INPUT_WAITS[req.id];
        N.removeEventListener(window, CDP_INPUT[action], spy, true);
        var r = { defaultPrevented: !!(seen && seen.defaultPrevented) };
        if (req.holdMs) r.heldMs = N.round(N.now() - sent);
        if (msg.ok) resolve(r);
        else reject(new Error('real input failed: ' + clip(String(msg.error || ''), 300)));
      }
      INPUT_WAITS[req.id] = finish;
      var sent = N.now();
      if (!rawSend(N.stringify(req))) finish({ ok: false, error: 'the socket to the daemon is closed' });
    });
  }
  function onInputResult(msg) {
    if (hasOwn(INPUT_WAITS, msg.id)) INPUT_WAITS[msg.id](msg);
  }

  // The synthetic path of each action (a device's tab takes real input instead, see cdpInput).
  var SYNTHETIC_ACTIONS = {
    click: function (el, o) { return doClick(el, o); },
    dblclick: function (el) {
      return N.then(N.then(N.resolve(doClick(el, {})), function () { return doClick(el, {}); }), function (r1) {
          var ev = fireMouse(el, 'dblclick', centre(el), { detail: 2 });
          return { defaultPrevented: ev.defaultPrevented || (r1 && r1.defaultPrevented) };
        });
    },
    hover: function (el, o) { return doHover(el, o); },
    focus: function (el) { return doFocus(el); },
    blur: function (el) { return doBlur(el); },
    fill: function (el, o) { return doFill(el, o); },
    type: function (el, o) { return doType(el, o); },
    clear: function (el) { return doClear(el); },
    select: function (el, o) { return doSelect(el, o); },
    check: function (el, o) { return doCheck(el, true, o); },
    uncheck: function (el, o) { return doCheck(el, false, o); },
    submit: function (el) { return doSubmit(el); },
    press: function (el, o) { return doPress(el, o); },
    scrollIntoView: function (el) {
      N.scrollIntoView(el, { block: 'center', inline: 'nearest' });
      return {};
    },
    upload: function (el, o) { return doUpload(el, o); },
    drag: function (el, o) { return doDrag(el, o); }
  };
  // ---- hydration: a server-rendered page before its framework attached its handlers ----------------
  // A click that lands before hydration reaches no handler, and a value filled before it may be reset
  // by it. Each row recognises a framework on the page (`on`) and says whether it has hydrated (`done`),
  // by what the framework itself leaves once it has: its route announcer, React's fiber on an element,
  // Vue's app on its root, an Astro island's `ssr` attribute gone. A page that names a framework it is
  // not can only make an act wait (at most HYDRATE_ACT_MS) or skip the wait it would have had.
  var HYDRATE_ACT_MS = 3000;
  var HYDRATE_OPEN_MS = 5000;
  function winHas(name) {
    try {
      return window[name] != null;
    } catch (e) {
      return false;
    }
  }
  function reactFiber(el) {
    if (!el) return false;
    try {
      return N.some(N.keys(el), function (k) {
        return N.indexOf(k, '__reactFiber$') === 0;
      });
    } catch (e) {
      return false;
    }
  }
  var HYDRATION = [
    {
      name: 'Next.js',
      on: function () {
        return !!N.getElementById(document, '__NEXT_DATA__') || winHas('__next_f');
      },
      done: function () {
        return (
          !!N.querySelector(document, 'next-route-announcer') ||
          reactFiber(N.querySelector(document, '#__next > *'))
        );
      }
    },
    {
      name: 'React Router',
      on: function () {
        return winHas('__reactRouterContext') || winHas('__remixContext');
      },
      done: function () {
        return reactFiber(document.body);
      }
    },
    {
      name: 'SvelteKit',
      on: function () {
        try {
          return N.some(N.keys(window), function (k) {
            return N.indexOf(k, '__sveltekit_') === 0;
          });
        } catch (e) {
          return false;
        }
      },
      done: function () {
        return !!N.getElementById(document, 'svelte-announcer');
      }
    },
    {
      name: 'Nuxt',
      on: function () {
        return winHas('__NUXT__') || !!N.getElementById(document, '__NUXT_DATA__');
      },
      done: function () {
        var root = N.getElementById(document, '__nuxt');
        return !!root && hasOwn(root, '__vue_app__');
      }
    },
    {
      name: 'Astro',
      on: function () {
        return !!N.querySelector(document, 'astro-island');
      },
      done: function () {
        return !N.querySelector(document, 'astro-island[ssr][client="load"],astro-island[ssr][client="idle"]');
      }
    }
  ];
  // The framework this page runs (its row), or null.
  function hydrationRow() {
    for (var i = 0; i < HYDRATION.length; i++) {
      try {
        if (HYDRATION[i].on()) return HYDRATION[i];
      } catch (e) {
        /* a page's odd globals: not recognised */
      }
    }
    return null;
  }
  // The framework this page runs that has not hydrated yet ('the document' while it is still being
  // parsed: its framework's scripts have not run), or null.
  function hydrationPending() {
    if (document.readyState === 'loading') return 'the document';
    var row = hydrationRow();
    try {
      return row && !row.done() ? row.name : null;
    } catch (e) {
      return null;
    }
  }
  // A promise of {framework, hydrated, waitedMs} once the page has hydrated or `ms` passed, or of null
  // when nothing was pending.
  function whenHydrated(ms) {
    var first = hydrationPending();
    if (!first) return N.resolve(null);
    var t0 = N.now();
    return new N.Promise(function (resolve) {
      (function poll() {
        var still = hydrationPending();
        var waited = N.round(N.now() - t0);
        var row = still ? null : hydrationRow();
        // a plain page waited for only while it was parsed: no framework to name
        if (!still) resolve(row ? { framework: row.name, hydrated: true, waitedMs: waited } : null);
        else if (waited >= ms) resolve({ framework: still, hydrated: false, waitedMs: waited });
        else N.setTimeout(poll, 50);
      })();
    });
  }
  function hydratedCmd(a) {
    var ms = typeof a.ms === 'number' && a.ms >= 0 ? N.min(a.ms, 10000) : HYDRATE_OPEN_MS;
    return N.then(whenHydrated(ms), function (h) {
      var row = h ? null : hydrationRow();
      return h || { framework: row ? row.name : null, hydrated: true, waitedMs: 0 };
    });
  }
  // Values an act filled, to tell the act that submits them when the page reset one since (a
  // framework re-rendering the field on hydration, a form library's reset): [{el, ref, field, value}].
  var FILLED = [];
  var FILL_ACTIONS = { fill: 1, type: 1, select: 1, clear: 1 };
  function fillsNoted(c) {
    var el = c.el;
    if (!FILL_ACTIONS[c.action] || !('value' in el)) return;
    FILLED = N.filter(FILLED, function (f) {
      return f.el !== el && f.el.isConnected;
    });
    N.push(FILLED, { el: el, ref: c.ref, field: c.name || el.name || '', value: el.value });
    if (FILLED.length > 50) N.shift(FILLED);
  }
  // The filled fields whose value is no longer what was filled (each told once), for the act `c`. An act
  // that can submit (a click, a press, a submit) takes what was filled with it: a form the app clears
  // after a save (a todo list's input) is the save's doing, not a reset before it.
  var SUBMITTING = { click: 1, dblclick: 1, press: 1, submit: 1 };
  function fillsReset(c) {
    if (FILL_ACTIONS[c.action]) return [];
    var out = [];
    FILLED = N.filter(FILLED, function (f) {
      var gone = !f.el.isConnected;
      var now = gone ? null : f.el.value;
      if (!gone && now === f.value) return !SUBMITTING[c.action];
      N.push(out, { ref: f.ref, field: clip(f.field, 120), emptied: !gone && now === '', replaced: gone });
      return false;
    });
    return N.slice(out, 0, 10);
  }

  // ---- act: one action, from its element to what it did --------------------------------------------
  // One act: wait (bounded) for a server-rendered page's framework to hydrate, resolve its element,
  // note what holds before, dispatch it (through CDP or synthetic events), let the page settle, then
  // tell what it did. `c` carries the act from step to step.
  function act(args) {
    var ms = HYDRATE_ACT_MS;
    if (typeof args.hydrateMs === 'number') ms = N.max(0, N.min(args.hydrateMs, HYDRATE_ACT_MS));
    return N.then(whenHydrated(ms), function (h) {
      return actNow(args, h);
    });
  }
  function actNow(args, hydration) {
    var action = args.action;
    if (N.indexOf(ACTIONS, action) < 0)
      throw new Error(
        "unknown action '" + clip(action, 40) + "'; use one of " + N.join(ACTIONS, ', ')
      );
    var a = isObj(args.args) ? args.args : {};
    var el = actElement(args, action);
    var opts = actOptions(a, action);
    dangerCheck(el, action, opts);
    var c = actBefore(el, action, opts);
    textWatchArm(el, action);
    c.warning = actPointer(c);
    if (hydration) c.effect.hydration = hydration;
    if (hydration && !hydration.hydrated)
      c.warning =
        (c.warning ? c.warning + '; ' : '') +
        'the page (' +
        hydration.framework +
        ') had not hydrated after ' +
        hydration.waitedMs +
        ' ms: the act may have reached no handler';
    var reset = fillsReset(c);
    if (reset.length) c.effect.resetFields = reset;
    c.probe = actProbe(opts);
    var run;
    c.t0 = N.now(); // before dispatch: events the handlers emit are at or after it
    c.wall0 = N.dateNow(); // a document request announced from here on is this act's doing
    c.viaCdp = args.input === 'cdp' && hasOwn(CDP_INPUT, action) && viewOf(el) === window;
    if (c.viaCdp) run = cdpInput(action, el, opts);
    if (!c.viaCdp) {
      var synthetic = SYNTHETIC_ACTIONS[action];
      run = synthetic ? synthetic(el, opts) : undefined;
      if (action === 'scrollIntoView') c.effect.scrolledIntoView = true;
    }
    return N.then(N.resolve(run), function (r) {
        r = r || {};
        fillsNoted(c); // the value as the act left it, before the page could reset it
        return N.then(settle(), function (settled) {
          actProbeEnd(c.probe);
          actEffectAfter(c, r);
          return actAnswer(c, r, settled);
        });
      },
      function (e) {
        try {
          if (c.probe.mo) N.disconnect(c.probe.mo);
        } catch (x) {
          /* ignore */
        }
        throw e;
      });
  }
  // The element an act is for: its ref, its target, or (for press) the focused element.
  function actElement(args, action) {
    var el;
    if (args.ref) el = mustResolve(args.ref);
    else if (args.target) el = resolveTarget(args.target);
    else if (action === 'press') el = document.activeElement || document.body;
    else throw new Error(action + ' needs a ref or a target');
    if (!(el instanceof viewOf(el).HTMLElement) && !(el instanceof viewOf(el).SVGElement))
      throw new Error('ref ' + args.ref + ' is not an HTML element');
    return el;
  }
  // A copy of the act's arguments; a drag's destination resolved into __toEl.
  function actOptions(a, action) {
    var opts = {};
    for (var k in a) if (hasOwn(a, k)) opts[k] = a[k];
    if (action === 'drag') {
      var toRef = a.toRef || (typeof a.target === 'string' ? a.target : null);
      if (toRef) opts.__toEl = mustResolve(toRef);
      else if (isObj(a.target)) opts.__toEl = resolveTarget(a.target);
    }
    return opts;
  }
  // What holds before the act: the element's ref, role, name, visibility, the focus and value.
  function actBefore(el, action, opts) {
    var cache = makeVisCache();
    var c = { action: action, el: el, opts: opts };
    c.ref = refFor(el);
    c.role = getRole(el);
    c.name = getName(el, c.role);
    c.testid = N.getAttribute(el, 'data-testid');
    c.visible = isVisible(el, cache);
    c.enabled = !isDisabled(el);
    c.focusBefore = actFocused();
    c.valueBefore = 'value' in el ? el.value : el.isContentEditable ? el.textContent : undefined;
    c.effect = {
      dispatched: true,
      targetMatched: true,
      visible: c.visible,
      enabled: c.enabled,
      defaultPrevented: false,
      focusMoved: null,
      valueChanged: false,
      domMutatedWithin: 0,
      occluded: false,
      occludedBy: null,
      scrolledIntoView: false
    };
    return c;
  }
  function actFocused() {
    return document.activeElement && document.activeElement !== document.body ? document.activeElement : null;
  }
  // A pointer act scrolls its element into view and looks for what covers it; the warning, if any.
  function actPointer(c) {
    var el = c.el,
      action = c.action,
      effect = c.effect;
    var pointer = { click: 1, dblclick: 1, check: 1, uncheck: 1, hover: 1, drag: 1 }[action];
    if (!pointer) return null;
    var ctr = centre(el);
    if (ctr.w > 0 && ctr.h > 0 && (ctr.x < 0 || ctr.y < 0 || ctr.x > innerWidth || ctr.y > innerHeight)) {
      try {
        N.scrollIntoView(el, { block: 'center', inline: 'center' });
        effect.scrolledIntoView = true;
      } catch (e) {
        /* ignore */
      }
    }
    var oc = occlusion(el);
    effect.occluded = oc.occluded;
    effect.occludedBy = oc.occludedBy;
    if (oc.occluded)
      return (
        'the element is covered at its centre by ' +
        oc.occludedByLabel +
        '; a real user could not click it. The synthetic event was dispatched to the element anyway.'
      );
    if (!c.visible)
      return (
        'the element is not visible; a real user could not interact with it. ' +
        'The synthetic event was dispatched anyway.'
      );
    if (!c.enabled && action !== 'hover')
      return 'the element is disabled; browsers ignore clicks on disabled controls.';
    return null;
  }
  // The mutation probe of one act: how many records, and the new texts that appeared.
  function actProbe(opts) {
    var p = { records: 0, appeared: [], mo: null, opts: opts };
    try {
      p.mo = new N.MutationObserver(function (rs) {
        actTally(p, rs);
      });
      N.observe(p.mo, document, {
        subtree: true,
        childList: true,
        attributes: true,
        characterData: true
      });
    } catch (e) {
      p.mo = null;
    }
    return p;
  }
  function actTally(p, rs) {
    var opts = p.opts,
      appeared = p.appeared;
    p.records += rs.length;
    for (var i = 0; i < rs.length && appeared.length < 20; i++) {
      var r = rs[i];
      var nodes = r.type === 'characterData' ? [r.target] : r.addedNodes;
      for (var j = 0; j < (nodes ? nodes.length : 0); j++) {
        var n = nodes[j];
        if (n.nodeType === 1 && isIgnored(n)) continue;
        var tx = norm(n.nodeType === 3 ? n.data : n.nodeType === 1 ? textOf(n, 0) : '');
        if (tx && N.test(/\p{L}/u, tx) && tx !== opts.value && tx !== opts.text && N.indexOf(appeared, tx) < 0)
          N.push(appeared, clip(tx, 80));
      }
    }
  }
  function actProbeEnd(p) {
    try {
      if (p.mo) {
        actTally(p, N.takeRecords(p.mo));
        N.disconnect(p.mo);
      }
    } catch (e) {
      /* ignore */
    }
  }
  // The effect after the act settled: what the dispatch answered, the focus, the value, the DOM.
  function actEffectAfter(c, r) {
    var effect = c.effect,
      el = c.el;
    if (r.defaultPrevented) effect.defaultPrevented = true;
    if (r.heldMs != null) effect.heldMs = r.heldMs;
    if (r.alreadyAtValue) {
      effect.alreadyAtValue = true;
      effect.dispatched = false;
    }
    if (r.implicitSubmit) effect.implicitSubmit = true;
    if (r.activated) effect.activated = true;
    effect.targetMatched = el.isConnected;
    var fa = actFocused();
    if (fa !== c.focusBefore)
      effect.focusMoved = (c.focusBefore ? refFor(c.focusBefore) : 'null') + '->' + (fa ? refFor(fa) : 'null');
    if (N.test(/^(fill|type|clear|select|upload)$/, c.action)) {
      var after = 'value' in el ? el.value : el.isContentEditable ? el.textContent : undefined;
      effect.valueChanged = after !== c.valueBefore;
    }
    effect.domMutatedWithin = c.probe.records;
    if (c.probe.appeared.length) effect.appeared = clip(N.join(c.probe.appeared, ' | '), 200);
  }
  function actAnswer(c, r, settled) {
    var res = {
      ok: true,
      ref: c.ref,
      action: c.action,
      dispatched: c.effect.dispatched,
      settled: settled,
      settleReason: settled ? null : 'timeout',
      effect: c.effect,
      role: c.role,
      name: c.name
    };
    if (c.testid) res.testid = c.testid;
    if (c.el.type === 'password') res.password = true;
    if (r.files) res.files = r.files;
    if (r.to) res.to = r.to;
    if (c.warning) res.warning = c.warning;
    res.input = c.viaCdp ? 'cdp' : 'synthetic';
    res.ms = N.round(N.now() - c.t0);
    res.pt = N.floor(c.t0 * 10) / 10; // page time at dispatch: the daemon windows events by it
    res.documentId = S.documentId;
    if (docAnnounced && docAnnounced.at >= c.wall0)
      res.navigation = {
        requestId: docAnnounced.id,
        method: docAnnounced.method,
        url: docAnnounced.url,
        cause: docAnnounced.cause
      };
    return res;
  }
  function actSequence(args) {
    var steps = N.isArray(args.steps) ? args.steps : null;
    if (!steps || !steps.length)
      throw new Error('act_sequence needs steps:[{ref|target, action, args?}]');
    if (steps.length > 50)
      throw new Error('act_sequence takes at most 50 steps (got ' + steps.length + ')');
    var out = [],
      effects = [],
      i = 0;
    function next() {
      if (i >= steps.length)
        return {
          ok: true,
          count: out.length,
          completed: out.length,
          steps: out,
          effects: effects,
          dispatched: out.length > 0
        };
      var st = steps[i] || {};
      var idx = i++;
      var p;
      try {
        p = act(args.input && isObj(st) ? { ref: st.ref, target: st.target, action: st.action, args: st.args,
          input: args.input } : st);
      } catch (e) {
        p = N.reject(e);
      }
      return N.then(N.resolve(p), function (r) {
          var s = {
            ref: r.ref,
            action: r.action,
            dispatched: r.dispatched,
            settled: r.settled,
            settleReason: r.settleReason,
            role: r.role,
            name: r.name
          };
          if (r.testid) s.testid = r.testid;
          if (r.warning) s.warning = r.warning;
          s.input = r.input;
          N.push(out, s);
          N.push(effects, r.effect);
          return next();
        },
        function (e) {
          N.push(out, {
            ref: st.ref || null,
            action: st.action,
            dispatched: false,
            error: clip(errMsg(e), 1000)
          });
          return {
            ok: false,
            count: out.length - 1,
            completed: out.length - 1,
            stalled_at: idx,
            failedAt: idx,
            error: clip(errMsg(e), 1000),
            steps: out,
            effects: effects,
            dispatched: out.length > 1
          };
        });
    }
    return next();
  }

