// What the fuzz property (stored-as-sent.js) found, kept as explicit cases: each runs in every
// variant and locale of the fuzz test and of `npm run fuzz`, before anything generated, with a
// comment saying what it broke.

/** @typedef {import('./fuzz-users.js').FuzzCase} FuzzCase */

/** @type {{ title: string, requests: FuzzCase }[]} */
export const REGRESSIONS = [
  {
    // Seed 7 (path 54:7:3:4): the email pattern `X+@X+\.X+` backtracked over a domain of dots
    // that was wrong only at its end, in time quadratic in its length: this request held the event
    // loop for 5.4 s, 100,000 characters for 22 s. Fixed in user-schema.js (a lookahead for the dot).
    title: 'a 50,000-character email of dots, wrong only at its end, is refused at once',
    requests: [
      [
        {
          resolution: 'ignore',
          items: [{ email: `a@${'.'.repeat(50_000)} `, name: 'Dots' }],
          plausible: [false],
          expect: 'refuse',
        },
        {
          resolution: 'ignore',
          items: [
            { email: `a@${'a.'.repeat(25_000)}\u0000`, name: 'Dots' },
            { email: 'dots@example.com', name: 'Fine' },
          ],
          plausible: [false, true],
          expect: 'refuse',
        },
        {
          resolution: 'merge',
          items: [{ email: `a@${'İ.'.repeat(25_000)}@`, name: 'Dots' }],
          plausible: [false],
          expect: 'refuse',
        },
      ],
    ],
  },
  {
    // Seed 650694646 (path 95:1:…): a lone surrogate in the name made the validator skip the
    // email as stored, so the 400 named the name but not the email of 254 characters that
    // lower-cases to 255 (İ becomes i and U+0307). Fixed in user-schema.js.
    title: 'a lone surrogate in one field does not hide the email too long once lower-cased',
    requests: [
      [
        {
          resolution: 'ignore',
          items: [{ email: `İ${'a'.repeat(249)}@a.a`, name: 'x\ud800' }],
          plausible: [false],
          expect: 'refuse',
        },
        {
          resolution: 'merge',
          items: [
            { email: `${'İ'.repeat(5)}${'b'.repeat(245)}@b.b`, name: 'B', phone: '+1234567\udc00' },
          ],
          plausible: [false],
          expect: 'refuse',
        },
      ],
    ],
  },
];
