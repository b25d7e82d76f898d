/**
 * A real WebGPU device for the tests: Dawn for Node (the `webgpu` npm
 * package), on whatever adapter it finds. On a machine without a GPU that
 * is SwiftShader's Vulkan driver, which Debian's `chromium` package ships:
 * VK_ICD_FILENAMES is pointed at it when unset (Dawn also needs the Vulkan
 * loader, Debian's `libvulkan1`). Where no adapter is found the tests skip
 * with the reason, and fail instead under WEBGPU_REQUIRED=1 (npm run
 * test:webgpu, CI).
 */
import { existsSync } from 'node:fs';
import type { WebGPUDevice } from '../../src/device/webgpu.js';

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/** What the tests use of a GPUDevice beyond what the library needs (shaders and bind groups). */
export interface TestDevice extends WebGPUDevice {
  createShaderModule(d: { code: string }): unknown;
  createComputePipeline(d: { layout: 'auto'; compute: { module: unknown; entryPoint: string } }): { getBindGroupLayout(i: number): unknown };
  createBindGroup(d: { layout: unknown; entries: { binding: number; resource: { buffer: unknown; offset?: number; size?: number } }[] }): unknown;
  createCommandEncoder(): ReturnType<WebGPUDevice['createCommandEncoder']> & {
    beginComputePass(): { setPipeline(p: unknown): void; setBindGroup(i: number, g: unknown): void; dispatchWorkgroups(x: number): void; end(): void };
  };
  destroy(): void;
}

export interface Gpu<D = TestDevice> {
  device: D;
  /** "vendor architecture device description" of the adapter. */
  adapter: string;
  /** Whether the adapter is SwiftShader, a CPU emulation (its timings say nothing about a GPU). */
  swiftshader: boolean;
  /** Dawn's instance and adapter, kept reachable: Dawn tears the device down (a submit then crashes) when they are collected. */
  keep: unknown[];
}

/** A device of Dawn for Node with the standard WebGPU types (the demo's and bench's), or the reason there is none. */
export async function openDawn(): Promise<Gpu<GPUDevice> | string> {
  if (process.env.VK_ICD_FILENAMES === undefined && existsSync(SWIFTSHADER_ICD)) process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  let webgpu: { create(flags: string[]): GPU; globals: object };
  try {
    webgpu = (await import('webgpu')) as unknown as typeof webgpu;
  } catch (e) {
    return `the webgpu package (Dawn for Node) does not load here: ${(e as Error).message}`;
  }
  Object.assign(globalThis, webgpu.globals);
  const instance = webgpu.create([]);
  const adapter = await instance.requestAdapter();
  if (adapter === null) {
    return "Dawn found no WebGPU adapter (no GPU, and no SwiftShader: install Debian's chromium and libvulkan1, or set VK_ICD_FILENAMES)";
  }
  const device = await adapter.requestDevice();
  const i = adapter.info;
  const name = [i.vendor, i.architecture, i.device, i.description].filter((x) => x).join(' ') || 'unknown adapter';
  return { device, adapter: name, swiftshader: /swiftshader/i.test(name), keep: [instance, adapter] };
}

/** `openDawn`, its device seen through the few members the tests use. */
export async function openGpu(): Promise<Gpu | string> {
  const g = await openDawn();
  return typeof g === 'string' ? g : { ...g, device: g.device as unknown as TestDevice };
}

/** Skips with the reason, or fails where a WebGPU device is required. */
export function skipReason(reason: string): string {
  if (process.env.WEBGPU_REQUIRED === '1') throw new Error(`WEBGPU_REQUIRED=1 but ${reason}`);
  return reason;
}
