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
        { resolution: 'ignore', items: [{ email: `a@${'.'.repeat(50_000)} `, name: 'Dots' }], plausible: [false], expect: 'refuse' },
        { resolution: 'ignore', items: [{ email: `a@${'a.'.repeat(25_000)}\u0000`, name: 'Dots' }, { email: 'dots@example.com', name: 'Fine' }], plausible: [false, true], expect: 'refuse' },
        { resolution: 'merge', items: [{ email: `a@${'İ.'.repeat(25_000)}@`, name: 'Dots' }], plausible: [false], expect: 'refuse' },
      ],
    ],
  },
];
