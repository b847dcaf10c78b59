import { randomUUID } from 'node:crypto';
import http from 'node:http';

export const SECRET_ARN =
  'arn:aws:secretsmanager:us-east-1:000000000000:secret:sluice/ingest-token-AbCdEf';

/**
 * Secrets Manager on 127.0.0.1, speaking the AWS JSON 1.1 protocol the SDK uses, so the handler's,
 * the service's and the rotation function's real clients (bundled or not) talk to it as they do
 * on AWS. One secret, SECRET_ARN, with versions and stages as Secrets Manager keeps them:
 * GetSecretValue (by stage or version), PutSecretValue, DescribeSecret and UpdateSecretVersionStage,
 * the calls of a reader and of a rotation. The SDK is pointed here by the environment it reads
 * anyway: `env` holds AWS_ENDPOINT_URL_SECRETS_MANAGER, stand-in credentials and a region, and
 * INGEST_TOKEN_SECRET_ARN.
 * @param {{ token: string }} options  the first version's SecretString (AWSCURRENT)
 */
export async function startSecretsManagerStub({ token }) {
  /** @type {{ target: string, secretId: string, authorization: string, versionStage?: string }[]} */
  const requests = [];
  /** @type {Map<string, { value: string | undefined, stages: Set<string> }>} versionId → its value (none yet: a rotation's new version before createSecret) and stages */
  const versions = new Map([['v1', { value: token, stages: new Set(['AWSCURRENT']) }]]);
  const withStage = (/** @type {string} */ stage) =>
    [...versions].find(([, v]) => v.stages.has(stage));
  /** Moves a stage to a version, from wherever it was. @param {string} stage @param {string} id */
  const moveStage = (stage, id) => {
    for (const v of versions.values()) v.stages.delete(stage);
    versions.get(id)?.stages.add(stage);
  };
  /** @param {string} target @param {any} input @returns {[number, object]} */
  const answer = (target, input) => {
    if (input.SecretId !== SECRET_ARN)
      return [
        400,
        { __type: 'ResourceNotFoundException', message: `no secret ${input.SecretId} (${target})` },
      ];
    switch (target) {
      case 'secretsmanager.GetSecretValue': {
        const found = input.VersionId
          ? [input.VersionId, versions.get(input.VersionId)]
          : withStage(input.VersionStage ?? 'AWSCURRENT');
        if (
          found?.[1]?.value === undefined ||
          (input.VersionId && input.VersionStage && !found[1].stages.has(input.VersionStage))
        ) {
          return [
            400,
            {
              __type: 'ResourceNotFoundException',
              message: `no version ${input.VersionId ?? input.VersionStage}`,
            },
          ];
        }
        const [id, v] = /** @type {[string, { value: string, stages: Set<string> }]} */ (found);
        return [
          200,
          {
            ARN: SECRET_ARN,
            Name: 'sluice/ingest-token',
            SecretString: v.value,
            VersionId: id,
            VersionStages: [...v.stages],
          },
        ];
      }
      case 'secretsmanager.PutSecretValue': {
        const id = input.ClientRequestToken ?? randomUUID();
        const existing = versions.get(id);
        if (!existing) versions.set(id, { value: input.SecretString, stages: new Set() });
        else existing.value ??= input.SecretString;
        const stages = input.VersionStages ?? ['AWSCURRENT'];
        for (const stage of stages) {
          if (stage === 'AWSCURRENT') {
            const previous = withStage('AWSCURRENT');
            if (previous && previous[0] !== id) moveStage('AWSPREVIOUS', previous[0]);
          }
          moveStage(stage, id);
        }
        return [
          200,
          { ARN: SECRET_ARN, Name: 'sluice/ingest-token', VersionId: id, VersionStages: stages },
        ];
      }
      case 'secretsmanager.DescribeSecret':
        return [
          200,
          {
            ARN: SECRET_ARN,
            Name: 'sluice/ingest-token',
            RotationEnabled: true,
            VersionIdsToStages: Object.fromEntries(
              [...versions]
                .filter(([, v]) => v.stages.size > 0)
                .map(([id, v]) => [id, [...v.stages]]),
            ),
          },
        ];
      case 'secretsmanager.UpdateSecretVersionStage': {
        const { VersionStage: stage, MoveToVersionId: to, RemoveFromVersionId: from } = input;
        if (from && !versions.get(from)?.stages.has(stage))
          return [
            400,
            { __type: 'InvalidParameterException', message: `${stage} is not on ${from}` },
          ];
        if (to && stage === 'AWSCURRENT' && from) moveStage('AWSPREVIOUS', from);
        if (to) moveStage(stage, to);
        else versions.get(from)?.stages.delete(stage);
        return [200, { ARN: SECRET_ARN, Name: 'sluice/ingest-token' }];
      }
      default:
        return [400, { __type: 'InvalidRequestException', message: `not stubbed: ${target}` }];
    }
  };
  const server = http.createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? '');
      const input = JSON.parse(data || '{}');
      requests.push({
        target,
        secretId: input.SecretId,
        authorization: String(req.headers.authorization ?? ''),
        versionStage: input.VersionStage,
      });
      const [status, body] = answer(target, input);
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    requests,
    /** The value of the version at `stage`, or undefined. @param {string} stage */
    valueAt: (stage) => withStage(stage)?.[1].value,
    /** A new AWSCURRENT version, as `aws secretsmanager put-secret-value` makes one. @param {string} value */
    put: (value) =>
      void answer('secretsmanager.PutSecretValue', { SecretId: SECRET_ARN, SecretString: value }),
    /**
     * A rotation begins as RotateSecret begins one: a new version, AWSPENDING, with no value yet;
     * its id is the ClientRequestToken each step of the rotation function is invoked with.
     */
    startRotation: () => {
      const id = randomUUID();
      versions.set(id, { value: undefined, stages: new Set() });
      moveStage('AWSPENDING', id);
      return id;
    },
    env: {
      INGEST_TOKEN_SECRET_ARN: SECRET_ARN,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: `http://127.0.0.1:${port}`,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
