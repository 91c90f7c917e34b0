// Public entry point of the sublinear package.
export { native as loadNative } from './native.js';
