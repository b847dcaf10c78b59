import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loggedUrl } from '../../src/http/request-log.js';

describe('a URL as logged: its path and its query parameters by name (unit)', () => {
  test('values left out, names kept in order; a name that is not one shown as *', () => {
    for (const [url, logged] of [
      ['/users', '/users'],
      ['/users?', '/users'],
      ['/users?apikey=sk_live_123', '/users?apikey'],
      ['/users?apikey=sk_live_123&email=eq.ada%40example.com', '/users?apikey&email'],
      ['/users?token=a.b.c&&on_conflict=email&columns', '/users?token&on_conflict&columns'],
      ['/users?ada%40example.com', '/users?*'],
      ['/users?ada@example.com=1&x=%00', '/users?*&x'],
      ['/users?a=1=2&b', '/users?a&b'],
      [`/users?${'n'.repeat(65)}=1`, '/users?*'],
    ])
      assert.equal(loggedUrl(url), logged, url);
  });
});
