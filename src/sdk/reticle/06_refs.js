  // == Section: refs == refs tied to DOM nodes, ignored subtrees
  // provides: HAS_WEAKREF, REF_OF, EL_OF, REF_MAX, refNext, claimBlock, refFor, sweepRefs, resolveRef,
  //   staleError, mustResolve, IGNORE_SEL, isIgnored, SKIP_TAGS
  // uses: N (01), clip (03), ssGet (03), ssSet (03)
  // ---- refs: e1, e2... tied to DOM nodes -------------------------------------------------------
  var HAS_WEAKREF = typeof WeakRef === 'function';
  var REF_OF = new WeakMap();
  var EL_OF = new Map(); // ref -> WeakRef(element); insertion order = LRU order
  var REF_MAX = 10000;
  var refNext = 0,
    refBlockEnd = 0,
    mints = 0;
  function claimBlock() {
    var base = parseInt(ssGet('__reticle_ref_base') || '0', 10);
    if (!(base >= 0)) base = 0;
    if (base < refNext) base = refNext;
    refNext = base;
    refBlockEnd = base + 100;
    ssSet('__reticle_ref_base', String(refBlockEnd));
  }
  function refFor(el) {
    if (!el || el.nodeType !== 1) return null;
    var r = N.get(REF_OF, el);
    if (r) {
      var h = N.get(EL_OF, r);
      if (h) {
        N.delete(EL_OF, r);
        N.set(EL_OF, r, h);
        return r;
      }
    }
    if (refNext >= refBlockEnd) claimBlock();
    refNext++;
    r = 'e' + refNext;
    N.set(REF_OF, el, r);
    N.set(EL_OF, r,
      HAS_WEAKREF
        ? new WeakRef(el)
        : {
            deref: function () {
              return el;
            }
          });
    if (EL_OF.size > REF_MAX) {
      var first = N.invoke(N.invoke(EL_OF, 'keys'), 'next').value;
      N.delete(EL_OF, first);
    }
    if (++mints % 1000 === 0) sweepRefs();
    return r;
  }
  function sweepRefs() {
    N.forEach(EL_OF, function (h, r) {
      var el = N.deref(h);
      if (!el) N.delete(EL_OF, r);
    });
  }
  function resolveRef(ref) {
    if (typeof ref !== 'string') return null;
    var h = N.get(EL_OF, ref);
    if (!h) return null;
    var el = N.deref(h);
    if (!el || !el.isConnected) {
      N.delete(EL_OF, ref);
      return null;
    }
    N.delete(EL_OF, ref);
    N.set(EL_OF, ref, h);
    return el;
  }
  function staleError(ref) {
    var r = clip(ref, 128);
    return new Error(
      'stale ref ' +
        r +
        ": the element is no longer in the page; take a new snapshot (ref '" +
        r +
        "' no longer resolves to an element)"
    );
  }
  function mustResolve(ref) {
    var el = resolveRef(ref);
    if (!el) throw staleError(ref);
    return el;
  }

  // ---- ignored subtrees ----------------------------------------------------------------------
  var IGNORE_SEL =
    '[data-reticle-overlay],[data-reticle-cursor],[data-reticle-hud],[data-reticle-glow],[data-reticle-mark],[data-reticle-blocker],[data-reticle-ignore],[data-agentation],#__next-build-watcher,nextjs-portal,[data-nextjs-dialog],[data-nextjs-toast],vite-error-overlay';
  function isIgnored(el) {
    try {
      return !!(el && el.closest && N.closest(el, IGNORE_SEL));
    } catch (e) {
      return false;
    }
  }
  var SKIP_TAGS = {
    SCRIPT: 1,
    STYLE: 1,
    NOSCRIPT: 1,
    TEMPLATE: 1,
    HEAD: 1,
    META: 1,
    LINK: 1,
    TITLE: 1,
    BASE: 1
  };

