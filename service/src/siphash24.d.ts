// siphash24 ships no types: what sluice uses of it.
declare module 'siphash24' {
  function siphash24(data: Uint8Array, key: Uint8Array, out?: Uint8Array): Uint8Array;
  namespace siphash24 {
    const BYTES: number;
    const KEYBYTES: number;
  }
  export default siphash24;
}
