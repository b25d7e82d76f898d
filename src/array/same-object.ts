/**
 * The check behind our fast constructors of arrow-js objects (src/array/arrowjs.ts,
 * src/array/imported.ts): arrow-js's constructors do work an import does not need
 * (argument clamping, a megamorphic `typeId` read, unwrapping their arguments), so
 * an import stores the same fields directly, but only where this check, run once
 * at load time against the arrow-js in use, shows that both make the same object.
 */

/**
 * Whether `fast` is what `slow` is: the same prototype, the same own properties
 * (string and symbol keys) in the same order, and the same values. A value that
 * is an array or a typed array in both may be another object with the same
 * elements (a constructor that copies its argument, a fresh empty array each).
 */
export function sameOwnFields(slow: object, fast: object): boolean {
  if (Object.getPrototypeOf(slow) !== Object.getPrototypeOf(fast)) return false;
  const keys = Reflect.ownKeys(slow);
  const fkeys = Reflect.ownKeys(fast);
  if (keys.length !== fkeys.length) return false;
  const a = slow as Record<PropertyKey, unknown>;
  const b = fast as Record<PropertyKey, unknown>;
  return keys.every((k, i) => fkeys[i] === k && sameValue(a[k], b[k]));
}

function sameValue(x: unknown, y: unknown): boolean {
  if (Object.is(x, y)) return true;
  const listX = Array.isArray(x) || ArrayBuffer.isView(x);
  if (!listX || Object.getPrototypeOf(x) !== Object.getPrototypeOf(y) || x instanceof DataView) return false;
  const xs = x as ArrayLike<unknown>;
  const ys = y as ArrayLike<unknown>;
  if (xs.length !== ys.length) return false;
  for (let i = 0; i < xs.length; i++) if (!Object.is(xs[i], ys[i])) return false;
  return true;
}
