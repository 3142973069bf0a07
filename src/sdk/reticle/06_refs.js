  // == Section: refs == refs tied to DOM nodes, ignored subtrees
  // provides: HAS_WEAKREF, REF_OF, EL_OF, REF_MAX, refNext, claimBlock, refFor, sweepRefs, resolveRef,
  //   staleError, mustResolve, IGNORE_SEL, isIgnored, SKIP_TAGS
  // uses: clip (03), ssGet (03), ssSet (03)
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
    var r = REF_OF.get(el);
    if (r) {
      var h = EL_OF.get(r);
      if (h) {
        EL_OF.delete(r);
        EL_OF.set(r, h);
        return r;
      }
    }
    if (refNext >= refBlockEnd) claimBlock();
    refNext++;
    r = 'e' + refNext;
    REF_OF.set(el, r);
    EL_OF.set(
      r,
      HAS_WEAKREF
        ? new WeakRef(el)
        : {
            deref: function () {
              return el;
            }
          }
    );
    if (EL_OF.size > REF_MAX) {
      var first = EL_OF.keys().next().value;
      EL_OF.delete(first);
    }
    if (++mints % 1000 === 0) sweepRefs();
    return r;
  }
  function sweepRefs() {
    EL_OF.forEach(function (h, r) {
      var el = h.deref();
      if (!el) EL_OF.delete(r);
    });
  }
  function resolveRef(ref) {
    if (typeof ref !== 'string') return null;
    var h = EL_OF.get(ref);
    if (!h) return null;
    var el = h.deref();
    if (!el || !el.isConnected) {
      EL_OF.delete(ref);
      return null;
    }
    EL_OF.delete(ref);
    EL_OF.set(ref, h);
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
      return !!(el && el.closest && el.closest(IGNORE_SEL));
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

