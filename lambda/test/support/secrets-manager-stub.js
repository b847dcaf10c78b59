import http from 'node:http';

export const SECRET_ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:sluice/ingest-token-AbCdEf';

/**
 * Secrets Manager's GetSecretValue on 127.0.0.1, speaking the AWS JSON 1.1 protocol the SDK uses,
 * so the handler's real client (bundled or not) fetches the token as it does on AWS. The SDK is
 * pointed here by the environment it reads anyway: `env` holds AWS_ENDPOINT_URL_SECRETS_MANAGER,
 * stand-in credentials and a region, and INGEST_TOKEN_SECRET_ARN.
 * @param {{ token: string }} options
 */
export async function startSecretsManagerStub({ token }) {
  /** @type {{ target: string, secretId: string, authorization: string }[]} */
  const requests = [];
  const server = http.createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? '');
      const secretId = JSON.parse(data || '{}').SecretId;
      requests.push({ target, secretId, authorization: String(req.headers.authorization ?? '') });
      const found = target === 'secretsmanager.GetSecretValue' && secretId === SECRET_ARN;
      res.writeHead(found ? 200 : 400, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(found
        ? { ARN: SECRET_ARN, Name: 'sluice/ingest-token', SecretString: token, VersionId: 'v1', VersionStages: ['AWSCURRENT'] }
        : { __type: 'ResourceNotFoundException', message: `no secret ${secretId} (${target})` }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    requests,
    env: {
      INGEST_TOKEN_SECRET_ARN: SECRET_ARN,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: `http://127.0.0.1:${port}`,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
    },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}
