/**
 * sameOwnFields: the load-time check that lets an import build arrow-js objects
 * without their constructors (src/array/same-object.ts). It must refuse every
 * difference a constructor could make, or an import would build another object
 * than arrow-js does.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sameOwnFields } from '../../src/array/same-object.js';

class A {
  constructor(
    public x: unknown,
    public y: unknown,
  ) {}
}
class B extends A {}
const sym = Symbol('s');

describe('sameOwnFields', () => {
  test('takes the same fields in the same order, arrays and typed arrays by their elements', () => {
    assert.equal(sameOwnFields(new A(1, 'a'), new A(1, 'a')), true);
    assert.equal(sameOwnFields(new A([], [1, 2]), new A([], [1, 2])), true);
    assert.equal(sameOwnFields(new A(new Uint32Array([0, 3]), NaN), new A(new Uint32Array([0, 3]), NaN)), true);
  });

  test('refuses another prototype, key order, key, value or element', () => {
    assert.equal(sameOwnFields(new A(1, 2), new B(1, 2)), false, 'prototype');
    assert.equal(sameOwnFields({ x: 1, y: 2 }, { y: 2, x: 1 }), false, 'order');
    assert.equal(sameOwnFields({ x: 1 }, { x: 1, y: undefined }), false, 'an extra key');
    assert.equal(sameOwnFields({ x: 1, [sym]: 1 }, { x: 1 }), false, 'a symbol key');
    assert.equal(sameOwnFields(new A(0, 1), new A(-0, 1)), false, '-0 is not 0');
    assert.equal(sameOwnFields(new A([1], 0), new A([2], 0)), false, 'an element');
    assert.equal(sameOwnFields(new A(new Uint32Array([1]), 0), new A(new Int32Array([1]), 0)), false, 'another typed array class');
    assert.equal(sameOwnFields(new A([1], 0), new A({ 0: 1, length: 1 }, 0)), false, 'an array-like is not an array');
    assert.equal(sameOwnFields(new A({ a: 1 }, 0), new A({ a: 1 }, 0)), false, 'other objects by identity');
  });
});
