import express from 'express';
import { HttpError } from '../errors.js';
import { AdmissionBudget, admitRequest } from '../http/admission.js';
import { readJsonBody } from '../http/json-body.js';
import { requireToken } from '../http/require-token.js';
import { parseUserBatch } from './user-schema.js';
import { createGroupCommit } from './group-commit.js';
import { createUserWriter } from './user-repository.js';

/**
 * POST /users: authenticate, read the JSON array, validate every item, write all or nothing.
 *
 * @param {{ config: import('../config.js').Config, db: import('../db.js').Database, metrics: import('../metrics.js').Metrics }} deps
 */
export function userRoutes({ config, db, metrics }) {
  const router = express.Router();
  const writer = createUserWriter(db, { chunkRows: config.insertChunkRows, strategy: config.insertStrategy });
  const groupCommit = config.groupCommit
    ? createGroupCommit({
        db,
        replays: writer.replays,
        writeAlone: writer.insertUsers,
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

  router.post(
    '/users',
    requireToken(config.ingestToken),
    admitRequest({ budget, maxBodyBytes: config.maxBodyBytes, metrics: metrics.admission }),
    readJson,
    async (req, res) => {
      const items = req.body;
      if (!Array.isArray(items)) throw new HttpError(400, 'not_an_array', 'the body must be a JSON array of users');
      if (items.length === 0) throw new HttpError(400, 'empty_batch', 'the array is empty: send 1 to MAX_BATCH_ITEMS users');
      if (items.length > config.maxBatchItems) {
        throw new HttpError(413, 'too_many_items', `${items.length} users is over MAX_BATCH_ITEMS (${config.maxBatchItems}); split the batch`);
      }

      const rows = parseUserBatch(items);
      // The parsed objects are twice the rows' size: let them go before the long wait on the database.
      const received = items.length;
      req.body = undefined;
      const endTimer = metrics.insertDuration.startTimer();
      const inserted = await insertUsers(rows);
      endTimer();

      metrics.batchSize.observe(received);
      metrics.usersReceived.inc(received);
      metrics.usersInserted.inc(inserted);
      res.status(inserted > 0 ? 201 : 200).json({ received, inserted, duplicates: received - inserted });
    },
  );
  return router;
}
