import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, describe, test } from 'node:test';
import { parse } from 'yaml';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TEMPLATE = path.join(ROOT, 'template.yaml');
// A git-ignored virtualenv: both linters come from PyPI, pinned in lambda/requirements-lint.txt.
const VENV = path.join(ROOT, '.cache', 'python');
const bin = (/** @type {string} */ name) => path.join(VENV, 'bin', name);

/** @param {string} cmd @param {string[]} args */
function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', env: { ...process.env, SAM_CLI_TELEMETRY: '0' }, timeout: 600_000 });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}` };
}

describe('template.yaml', () => {
  /** @type {any} */ let t;
  before(() => {
    t = parse(readFileSync(TEMPLATE, 'utf8'));
    if (!existsSync(bin('sam')) || !existsSync(bin('cfn-lint'))) {
      const venv = run('python3', ['-m', 'venv', VENV]);
      assert.equal(venv.code, 0, `python3 -m venv failed: ${venv.out}`);
      const pip = run(bin('pip'), ['install', '--quiet', '-r', path.join(ROOT, 'lambda', 'requirements-lint.txt')]);
      assert.equal(pip.code, 0, `installing cfn-lint and aws-sam-cli failed: ${pip.out}`);
    }
  });

  test('cfn-lint finds nothing, not even a warning', () => {
    const r = run(bin('cfn-lint'), [TEMPLATE]);
    assert.equal(r.code, 0, r.out);
    assert.equal(r.out.trim(), '');
  });

  test('sam validate --lint accepts it', () => {
    const r = run(bin('sam'), ['validate', '--lint', '-t', TEMPLATE, '--region', 'us-east-1']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /is a valid SAM Template/);
  });

  test('queue and dead-letter queue: redrive ≥ 5 receives, 14 days, encrypted', () => {
    const { IngestQueue: q, DeadLetterQueue: dlq } = t.Resources;
    assert.deepEqual(q.Properties.RedrivePolicy.deadLetterTargetArn, { 'Fn::GetAtt': ['DeadLetterQueue', 'Arn'] });
    assert.ok(q.Properties.RedrivePolicy.maxReceiveCount >= 5);
    for (const queue of [q, dlq]) {
      assert.equal(queue.Properties.MessageRetentionPeriod, 14 * 24 * 3600);
      assert.equal(queue.Properties.SqsManagedSseEnabled, true);
    }
  });

  test('the function: nodejs22.x on arm64, fed by the queue with partial batch responses', () => {
    const fn = t.Resources.FeederFunction.Properties;
    assert.equal(fn.Runtime, 'nodejs22.x');
    assert.deepEqual(fn.Architectures, ['arm64']);
    const ev = Object.values(fn.Events).find((/** @type {any} */ e) => e.Type === 'SQS').Properties;
    assert.deepEqual(ev.Queue, { 'Fn::GetAtt': ['IngestQueue', 'Arn'] });
    assert.deepEqual(ev.FunctionResponseTypes, ['ReportBatchItemFailures']);
    assert.deepEqual(ev.BatchSize, { Ref: 'BatchSize' });
    assert.equal(t.Parameters.BatchSize.Default, 1000);
    assert.equal(t.Parameters.BatchSize.MaxValue, 10000);
    assert.deepEqual(ev.MaximumBatchingWindowInSeconds, { Ref: 'MaximumBatchingWindowInSeconds' });
    assert.deepEqual(ev.ScalingConfig.MaximumConcurrency, { Ref: 'MaximumConcurrency' });
    assert.deepEqual(fn.Environment.Variables.SERVICE_URL, { Ref: 'ServiceUrl' });
    assert.deepEqual(fn.Environment.Variables.INGEST_TOKEN, { Ref: 'IngestToken' });
    assert.equal(t.Parameters.IngestToken.NoEcho, true);
  });

  test('visibility timeout ≥ 6 × function timeout + the largest batching window', () => {
    const visibility = t.Resources.IngestQueue.Properties.VisibilityTimeout;
    const timeout = t.Resources.FeederFunction.Properties.Timeout;
    assert.ok(visibility >= 6 * timeout + t.Parameters.MaximumBatchingWindowInSeconds.MaxValue);
  });

  test('an alarm watches the dead-letter queue; the outputs give the queue URL and ARN', () => {
    const alarm = Object.values(t.Resources).find((/** @type {any} */ r) => r.Type === 'AWS::CloudWatch::Alarm').Properties;
    assert.equal(alarm.Namespace, 'AWS/SQS');
    assert.deepEqual(alarm.Dimensions[0].Value, { 'Fn::GetAtt': ['DeadLetterQueue', 'QueueName'] });
    assert.deepEqual(t.Outputs.QueueUrl.Value, { Ref: 'IngestQueue' });
    assert.deepEqual(t.Outputs.QueueArn.Value, { 'Fn::GetAtt': ['IngestQueue', 'Arn'] });
  });
});
