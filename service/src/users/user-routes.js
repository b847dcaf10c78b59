import express from 'express';
import { HttpError } from '../errors.js';
import { AdmissionBudget, admitRequest } from '../http/admission.js';
import { requireToken } from '../http/require-token.js';
import { parseUserBatch } from './user-schema.js';
import { insertUsers } from './user-repository.js';

/**
 * POST /users: authenticate, read the JSON array, validate every item, write all or nothing.
 *
 * @param {{ config: import('../config.js').Config, db: import('../db.js').Database, metrics: import('../metrics.js').Metrics }} deps
 */
export function userRoutes({ config, db, metrics }) {
  const router = express.Router();
  const readJson = express.json({ limit: config.maxBodyBytes, strict: false, type: () => true });
  const budget = new AdmissionBudget({ budgetBytes: config.admissionBudgetBytes, maxWaitMs: config.admissionWaitMs, onChange: metrics.admission.observe });

  router.post(
    '/users',
    requireToken(config.ingestToken),
    (req, _res, next) => {
      // Checked before reading the body, so a wrong type costs nothing.
      if (!req.is('application/json')) return next(new HttpError(415, 'unsupported_media_type', 'Content-Type must be application/json'));
      next();
    },
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
      const inserted = await insertUsers(db, rows, { chunkRows: config.insertChunkRows, strategy: config.insertStrategy });
      endTimer();

      metrics.batchSize.observe(received);
      metrics.usersReceived.inc(received);
      metrics.usersInserted.inc(inserted);
      res.status(inserted > 0 ? 201 : 200).json({ received, inserted, duplicates: received - inserted });
    },
  );
  return router;
}
