import { HttpError } from '../errors.js';
import { AdmissionBudget, admitRequest } from '../http/admission.js';
import { readJsonBody } from '../http/json-body.js';
import { requireToken } from '../http/require-token.js';
import { parseUserBatch } from './user-schema.js';
import { createGroupCommit } from './group-commit.js';
import { createUserWriter } from './user-repository.js';

/**
 * The body's users as rows to write, checked as a batch; the parsed objects are let go, since they
 * are twice the rows' size and the longest wait, on the database, is still ahead.
 * @param {import('express').Request} req
 * @param {number} maxBatchItems
 */
function takeBatch(req, maxBatchItems) {
  const items = req.body;
  req.body = undefined;
  if (!Array.isArray(items)) throw new HttpError(400, 'not_an_array', 'the body must be a JSON array of users');
  if (items.length === 0) throw new HttpError(400, 'empty_batch', 'the array is empty: send 1 to MAX_BATCH_ITEMS users');
  if (items.length > maxBatchItems) {
    throw new HttpError(413, 'too_many_items', `${items.length} users is over MAX_BATCH_ITEMS (${maxBatchItems}); split the batch`);
  }
  return { received: items.length, rows: parseUserBatch(items) };
}

/**
 * POST /users: authenticate, admit, read the JSON array, validate every item, write all or nothing.
 * Registered on the app itself, not a nested router: under the single-user load every layer a
 * request walks through shows in the profile.
 *
 * @param {import('express').Express} app
 * @param {{ config: import('../config.js').Config, db: import('../db.js').Database, metrics: import('../metrics.js').Metrics }} deps
 */
export function mountUserRoutes(app, { config, db, metrics }) {
  const writer = createUserWriter(db, { chunkRows: config.insertChunkRows, strategy: config.insertStrategy });
  const groupCommit = config.groupCommit
    ? createGroupCommit({
        writer,
        maxRows: config.groupCommitMaxRows,
        observe({ requests, rows, waitedSeconds }) {
          metrics.groupRequests.observe(requests);
          metrics.groupRows.observe(rows);
          for (const s of waitedSeconds) metrics.groupWait.observe(s);
        },
      })
    : undefined;
  /** Small requests are written in groups, large ones straight. @param {import('./user-schema.js').UserRow[]} rows */
  const insertUsers = (rows) => (groupCommit && rows.length <= config.groupCommitSmallRows ? groupCommit.insertUsers(rows) : writer.insertUsers(rows));
  const readJson = readJsonBody(config);
  const budget = new AdmissionBudget({ budgetBytes: config.admissionBudgetBytes, maxWaitMs: config.admissionWaitMs, onChange: metrics.admission.observe });

  app.post(
    '/users',
    requireToken(config.ingestToken),
    admitRequest({ budget, maxBodyBytes: config.maxBodyBytes, metrics: metrics.admission }),
    readJson,
    async (req, res) => {
      const { received, rows } = takeBatch(req, config.maxBatchItems);
      const endTimer = metrics.insertDuration.startTimer();
      const inserted = await insertUsers(rows);
      endTimer();

      metrics.batchSize.observe(received);
      metrics.usersReceived.inc(received);
      metrics.usersInserted.inc(inserted);
      res.status(inserted > 0 ? 201 : 200).json({ received, inserted, duplicates: received - inserted });
    },
  );
}
