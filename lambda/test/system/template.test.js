import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { FEEDER_VARIABLES, loadFeederConfig } from '../../src/config.js';
import { checkovTools, lintTools } from '../../../test/support/python-tools.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const TEMPLATE = path.join(ROOT, 'template.yaml');

/** @param {string} cmd @param {string[]} args */
function run(cmd, args) {
  const r = spawnSync(cmd, args, {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, SAM_CLI_TELEMETRY: '0' },
    timeout: 600_000,
  });
  return {
    code: r.status,
    stdout: r.stdout ?? '',
    out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`,
  };
}

describe('template.yaml', () => {
  /** @type {any} */ let t;
  /** @type {(name: string) => string} */ let bin;
  /** @type {string} */ let CHECKOV;
  before(() => {
    t = parse(readFileSync(TEMPLATE, 'utf8'));
    // Git-ignored virtualenvs of tools from PyPI, pinned in lambda/requirements-*.txt.
    bin = lintTools();
    CHECKOV = checkovTools()('checkov');
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
    assert.deepEqual(q.Properties.RedrivePolicy.deadLetterTargetArn, {
      'Fn::GetAtt': ['DeadLetterQueue', 'Arn'],
    });
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
    assert.deepEqual(ev.BatchSize, { 'Fn::If': ['IsFifo', 10, { Ref: 'BatchSize' }] });
    assert.equal(t.Parameters.BatchSize.Default, 1000);
    assert.equal(t.Parameters.BatchSize.MaxValue, 10000);
    assert.deepEqual(ev.MaximumBatchingWindowInSeconds, {
      'Fn::If': ['IsFifo', { Ref: 'AWS::NoValue' }, { Ref: 'MaximumBatchingWindowInSeconds' }],
    });
    assert.deepEqual(ev.ScalingConfig.MaximumConcurrency, { Ref: 'MaximumConcurrency' });
    // The full deployment points it at the internal load balancer; ServiceUrl keeps today's mode.
    assert.deepEqual(fn.Environment.Variables.SERVICE_URL, {
      'Fn::If': [
        'DeployService',
        { 'Fn::Sub': 'http://${LoadBalancer.DNSName}' },
        { Ref: 'ServiceUrl' },
      ],
    });
    assert.deepEqual(t.Conditions.DeployService, { 'Fn::Equals': [{ Ref: 'ServiceUrl' }, ''] });
    assert.equal(t.Parameters.ServiceUrl.Default, '');
    assert.equal(fn.Environment.Variables.INGEST_TOKEN, undefined);
    assert.deepEqual(fn.Environment.Variables.INGEST_TOKEN_SECRET_ARN['Fn::If'][1], {
      Ref: 'IngestTokenSecret',
    });
    assert.deepEqual(fn.VpcConfig['Fn::If'][0], 'DeployService');
    assert.deepEqual(fn.VpcConfig['Fn::If'][1].SecurityGroupIds, [{ Ref: 'FeederSecurityGroup' }]);
  });

  test("the feeder's modes are parameters: ConflictResolution and InvalidUsers, each value one the feeder takes, its default the feeder's", () => {
    const variables = t.Resources.FeederFunction.Properties.Environment.Variables;
    const feederGroup = t.Metadata['AWS::CloudFormation::Interface'].ParameterGroups.find(
      (/** @type {any} */ g) => g.Label.default === 'Feeder (Lambda)',
    );
    const defaults = loadFeederConfig({ SERVICE_URL: 'http://127.0.0.1:3000' });
    for (const [parameter, variable, field] of /** @type {const} */ ([
      ['ConflictResolution', 'CONFLICT_RESOLUTION', 'conflictResolution'],
      ['InvalidUsers', 'INVALID_USERS', 'invalidUsers'],
    ])) {
      const p = t.Parameters[parameter];
      assert.deepEqual(variables[variable], { Ref: parameter }, `${variable} is ${parameter}`);
      assert.ok(
        feederGroup.Parameters.includes(parameter),
        `${parameter} listed with the feeder's parameters`,
      );
      assert.equal(p.Default, defaults[field], `${parameter}'s default is the feeder's`);
      assert.equal(p.Default, FEEDER_VARIABLES[variable].default);
      for (const value of p.AllowedValues)
        assert.equal(
          loadFeederConfig({ SERVICE_URL: 'http://127.0.0.1:3000', [variable]: value })[field],
          value,
          `${parameter}=${value}`,
        );
      assert.throws(
        () =>
          loadFeederConfig({
            SERVICE_URL: 'http://127.0.0.1:3000',
            [variable]: `not-${p.AllowedValues.join('-')}`,
          }),
        new RegExp(`^ConfigError: ${variable} must be one of ${p.AllowedValues.join(', ')}, got`),
        `${parameter}'s AllowedValues are all the feeder takes`,
      );
      assert.match(
        p.Description,
        new RegExp(`\\(${variable}\\)`),
        `${parameter}'s description names ${variable}`,
      );
    }
  });

  test("QueueType Fifo: both queues FIFO and named .fifo, high-throughput, deduplication by the producer's ids; batches of 10, no window", () => {
    assert.deepEqual(
      { default: t.Parameters.QueueType.Default, allowed: t.Parameters.QueueType.AllowedValues },
      { default: 'Standard', allowed: ['Standard', 'Fifo'] },
    );
    assert.deepEqual(t.Conditions.IsFifo, { 'Fn::Equals': [{ Ref: 'QueueType' }, 'Fifo'] });
    /** What a property is with QueueType Fifo, and with Standard (undefined: left out). @param {any} value */
    const whenFifo = (value) => {
      if (!value?.['Fn::If']) return { fifo: value, standard: value };
      const [condition, fifo, standard] = value['Fn::If'];
      assert.equal(condition, 'IsFifo');
      const omitted = (/** @type {any} */ v) => (v?.Ref === 'AWS::NoValue' ? undefined : v);
      return { fifo: omitted(fifo), standard: omitted(standard) };
    };
    const { IngestQueue: q, DeadLetterQueue: dlq } = t.Resources;
    for (const [queue, suffix] of [
      [q, '-ingest.fifo'],
      [dlq, '-dlq.fifo'],
    ]) {
      assert.deepEqual(whenFifo(queue.Properties.FifoQueue), { fifo: true, standard: undefined });
      assert.deepEqual(whenFifo(queue.Properties.QueueName), {
        fifo: { 'Fn::Sub': `\${AWS::StackName}${suffix}` },
        standard: undefined,
      });
    }
    // 80 characters at most for a queue's name: the parameter's description says what that leaves the stack's.
    assert.match(
      t.Parameters.QueueType.Description,
      new RegExp(`at most ${80 - '-ingest.fifo'.length} characters`),
    );
    assert.deepEqual(whenFifo(q.Properties.ContentBasedDeduplication), {
      fifo: false,
      standard: undefined,
    });
    assert.deepEqual(whenFifo(q.Properties.DeduplicationScope), {
      fifo: 'messageGroup',
      standard: undefined,
    });
    assert.deepEqual(whenFifo(q.Properties.FifoThroughputLimit), {
      fifo: 'perMessageGroupId',
      standard: undefined,
    });
    const ev = Object.values(t.Resources.FeederFunction.Properties.Events).find(
      (/** @type {any} */ e) => e.Type === 'SQS',
    ).Properties;
    assert.deepEqual(whenFifo(ev.BatchSize), { fifo: 10, standard: { Ref: 'BatchSize' } });
    assert.deepEqual(whenFifo(ev.MaximumBatchingWindowInSeconds), {
      fifo: undefined,
      standard: { Ref: 'MaximumBatchingWindowInSeconds' },
    });
    assert.deepEqual(
      ev.FunctionResponseTypes,
      ['ReportBatchItemFailures'],
      'partial batch responses on both',
    );
  });

  test('visibility timeout ≥ 6 × function timeout + the largest batching window', () => {
    const visibility = t.Resources.IngestQueue.Properties.VisibilityTimeout;
    const timeout = t.Resources.FeederFunction.Properties.Timeout;
    assert.ok(visibility >= 6 * timeout + t.Parameters.MaximumBatchingWindowInSeconds.MaxValue);
  });

  test('an alarm watches the dead-letter queue; the outputs give the queue URL and ARN', () => {
    const alarm = t.Resources.DeadLetterAlarm.Properties;
    assert.equal(alarm.Namespace, 'AWS/SQS');
    assert.deepEqual(alarm.Dimensions[0].Value, { 'Fn::GetAtt': ['DeadLetterQueue', 'QueueName'] });
    assert.deepEqual(t.Outputs.QueueUrl.Value, { Ref: 'IngestQueue' });
    assert.deepEqual(t.Outputs.QueueArn.Value, { 'Fn::GetAtt': ['IngestQueue', 'Arn'] });
  });

  test('Checkov finds no failed check, and every skip in the template says why and is still needed', () => {
    const r = run(CHECKOV, [
      '-f',
      TEMPLATE,
      '--framework',
      'cloudformation',
      '--skip-download',
      '--compact',
      '-o',
      'json',
    ]);
    assert.ok(
      r.stdout.trim().startsWith('{') || r.stdout.trim().startsWith('['),
      `Checkov did not report: ${r.out}`,
    );
    const parsed = JSON.parse(r.stdout);
    const results = (Array.isArray(parsed) ? parsed[0] : parsed).results;
    const failed = results.failed_checks.map(
      (/** @type {any} */ c) => `${c.check_id} ${c.resource}: ${c.check_name}`,
    );
    assert.deepEqual(failed, [], `Checkov failed checks:\n${failed.join('\n')}`);
    const skippedByCheckov = new Set(
      results.skipped_checks.map(
        (/** @type {any} */ c) => `${c.check_id} ${c.resource.split('.').pop()}`,
      ),
    );
    for (const [name, resource] of Object.entries(t.Resources)) {
      for (const skip of resource.Metadata?.checkov?.skip ?? []) {
        assert.ok(
          typeof skip.comment === 'string' && skip.comment.length >= 40,
          `${name}: skip ${skip.id} needs a comment that says why`,
        );
        assert.ok(
          skippedByCheckov.has(`${skip.id} ${name}`),
          `${name}: skip ${skip.id} matches no check Checkov ran: remove it`,
        );
      }
    }
  });

  test('every alarm tells the alarm topic, when one is given, when it fires and when it clears', () => {
    const toTopic = {
      'Fn::If': ['HasAlarmTopic', [{ Ref: 'AlarmTopicArn' }], { Ref: 'AWS::NoValue' }],
    };
    assert.deepEqual(t.Conditions.HasAlarmTopic, {
      'Fn::Not': [{ 'Fn::Equals': [{ Ref: 'AlarmTopicArn' }, ''] }],
    });
    const alarms = Object.entries(t.Resources).filter(
      ([, r]) => r.Type === 'AWS::CloudWatch::Alarm',
    );
    assert.ok(alarms.length >= 8, `the issue asks for at least 8 alarms, found ${alarms.length}`);
    for (const [name, alarm] of alarms) {
      assert.deepEqual(alarm.Properties.AlarmActions, toTopic, `${name}: AlarmActions`);
      assert.deepEqual(alarm.Properties.OKActions, toTopic, `${name}: OKActions`);
    }
    const watched = alarms.map(
      ([, a]) =>
        a.Properties.MetricName ??
        a.Properties.Metrics.map((/** @type {any} */ m) => m.MetricStat?.Metric.MetricName).join(
          '+',
        ),
    );
    for (const metric of [
      'ApproximateNumberOfMessagesVisible',
      'ApproximateAgeOfOldestMessage',
      'Errors',
      'Throttles',
      'TargetResponseTime',
      'CPUUtilization',
      'FreeStorageSpace',
    ]) {
      assert.ok(watched.includes(metric), `no alarm on ${metric}`);
    }
    assert.ok(
      watched.some(
        (m) => m.includes('HTTPCode_ELB_5XX_Count') && m.includes('HTTPCode_Target_5XX_Count'),
      ),
      'no alarm on load balancer 5xx',
    );
  });

  test('no secret in plain text: no secret parameter, environment variable or password property', () => {
    const secretish = /token|password|secret|database_url/i;
    for (const [name, p] of Object.entries(t.Parameters)) {
      assert.notEqual(
        p.NoEcho,
        true,
        `${name}: a NoEcho parameter means a secret passes through CloudFormation`,
      );
      if (secretish.test(name))
        assert.ok(
          /Arn$/.test(name) && p.AllowedPattern.includes('arn:aws'),
          `${name}: a secret is passed by its ARN only`,
        );
    }
    // A *DATABASE_URL may name a host, never carry a user or a password (they come as secrets).
    const credentialFreeUrl = (/** @type {any} */ v) =>
      /^postgresql:\/\/\$\{[^@]*$/.test(v?.['Fn::Sub'] ?? '');
    /** @param {string} where @param {{ name: string, value?: unknown }[]} vars */
    const noSecretNames = (where, vars) => {
      for (const { name: n, value } of vars) {
        if (/DATABASE_URL$/.test(n))
          assert.ok(
            credentialFreeUrl(value),
            `${where}: ${n} must name the host only, no credentials`,
          );
        else
          assert.ok(
            !secretish.test(n) || /_SECRET_ARN$/.test(n),
            `${where}: ${n} must come from Secrets Manager, not the environment`,
          );
      }
    };
    for (const [name, r] of Object.entries(t.Resources)) {
      if (r.Type === 'AWS::Serverless::Function')
        noSecretNames(
          name,
          Object.entries(r.Properties.Environment?.Variables ?? {}).map(([n, value]) => ({
            name: n,
            value,
          })),
        );
      for (const c of r.Type === 'AWS::ECS::TaskDefinition'
        ? r.Properties.ContainerDefinitions
        : []) {
        // An entry may be an Fn::If that adds a variable only in one configuration.
        const entries = (c.Environment ?? []).map((/** @type {any} */ e) => e['Fn::If']?.[1] ?? e);
        noSecretNames(
          `${name}/${c.Name}`,
          entries.map((/** @type {any} */ e) => ({ name: e.Name, value: e.Value })),
        );
      }
    }
    const db = t.Resources.Database.Properties;
    assert.equal(db.MasterUserPassword, undefined);
    assert.equal(db.ManageMasterUserPassword, true);
    const service = t.Resources.TaskDefinition.Properties.ContainerDefinitions.find(
      (/** @type {any} */ c) => c.Name === 'service',
    );
    assert.deepEqual(service.Secrets.map((/** @type {any} */ s) => s.Name).sort(), [
      'PGPASSWORD',
      'PGUSER',
    ]);
    // The tokens by their secret's ARN: the service reads the secret itself, again at each refresh.
    assert.deepEqual(
      service.Environment.find((/** @type {any} */ e) => e.Name === 'INGEST_TOKENS_SECRET_ARN')
        .Value,
      { Ref: 'IngestTokenSecret' },
    );
    assert.match(JSON.stringify(service.Secrets), /MasterUserSecret\.SecretArn\}:password::/);
  });

  test('every security group rule names its peer group; the default allow-all egress is removed', () => {
    // The one inline rule allowed: AWS CDK's "disallow all traffic" placeholder, which only exists
    // to make CloudFormation drop the default egress rule.
    const placeholder = {
      IpProtocol: 'icmp',
      FromPort: 252,
      ToPort: 86,
      CidrIp: '255.255.255.255/32',
      Description: 'Disallow all traffic',
    };
    const groups = Object.entries(t.Resources).filter(
      ([, r]) => r.Type === 'AWS::EC2::SecurityGroup',
    );
    assert.deepEqual(groups.map(([n]) => n).sort(), [
      'DatabaseSecurityGroup',
      'EndpointSecurityGroup',
      'FeederSecurityGroup',
      'LoadBalancerSecurityGroup',
      'RdsProxySecurityGroup',
      'RotationSecurityGroup',
      'ServiceSecurityGroup',
    ]);
    for (const [name, g] of groups) {
      assert.equal(g.Properties.SecurityGroupIngress, undefined, `${name}: inline ingress`);
      assert.deepEqual(g.Properties.SecurityGroupEgress, [placeholder], `${name}: inline egress`);
    }
    const rules = Object.entries(t.Resources).filter(([, r]) =>
      /^AWS::EC2::SecurityGroup(Ingress|Egress)$/.test(r.Type),
    );
    assert.ok(rules.length >= 10);
    for (const [name, rule] of rules) {
      const p = rule.Properties;
      assert.equal(p.CidrIp ?? p.CidrIpv6, undefined, `${name}: names an address range`);
      if (rule.Type === 'AWS::EC2::SecurityGroupIngress') {
        assert.ok(
          p.SourceSecurityGroupId?.Ref?.endsWith('SecurityGroup'),
          `${name}: no source group`,
        );
      } else {
        // ECR's image layers come from S3, which has no security group: its prefix list stands in.
        const peer =
          p.DestinationSecurityGroupId?.Ref ??
          (p.DestinationPrefixListId?.Ref === 'S3PrefixListId' ? 'S3' : undefined);
        assert.ok(peer, `${name}: no destination group`);
      }
      assert.ok(p.FromPort === p.ToPort && p.IpProtocol === 'tcp', `${name}: one TCP port`);
    }
    const byPeer = rules.map(
      ([, r]) =>
        `${r.Properties.GroupId.Ref} ${r.Type.endsWith('Ingress') ? '<-' : '->'} ${r.Properties.SourceSecurityGroupId?.Ref ?? r.Properties.DestinationSecurityGroupId?.Ref ?? 'S3'}:${r.Properties.FromPort}`,
    );
    for (const edge of [
      'FeederSecurityGroup -> LoadBalancerSecurityGroup:80',
      'LoadBalancerSecurityGroup <- FeederSecurityGroup:80',
      'LoadBalancerSecurityGroup -> ServiceSecurityGroup:3000',
      'ServiceSecurityGroup <- LoadBalancerSecurityGroup:3000',
      'ServiceSecurityGroup -> DatabaseSecurityGroup:5432',
      'DatabaseSecurityGroup <- ServiceSecurityGroup:5432',
      'ServiceSecurityGroup -> RdsProxySecurityGroup:5432',
      'RdsProxySecurityGroup <- ServiceSecurityGroup:5432',
      'RdsProxySecurityGroup -> DatabaseSecurityGroup:5432',
      'DatabaseSecurityGroup <- RdsProxySecurityGroup:5432',
    ]) {
      assert.ok(byPeer.includes(edge), `missing ${edge}`);
    }
    assert.ok(
      !byPeer.some((e) => e.startsWith('DatabaseSecurityGroup ->')),
      'the database reaches nothing',
    );
  });

  test('the service: Fargate arm64 behind an internal ALB on /readyz, rollback on failure, CPU target tracking, WORKERS per vCPU', () => {
    const r = t.Resources;
    assert.equal(r.LoadBalancer.Properties.Scheme, 'internal');
    assert.equal(r.TargetGroup.Properties.HealthCheckPath, '/readyz');
    const svc = r.Service.Properties;
    assert.deepEqual(svc.DeploymentConfiguration.DeploymentCircuitBreaker, {
      Enable: true,
      Rollback: true,
    });
    assert.equal(svc.NetworkConfiguration.AwsvpcConfiguration.AssignPublicIp, 'DISABLED');
    // No task may start before its private way to ECR, the logs, the secrets and the database.
    for (const needed of [
      'S3GatewayEndpoint',
      'EcrApiEndpoint',
      'EcrDockerEndpoint',
      'LogsEndpoint',
      'SecretsManagerEndpoint',
      'ServiceToImageLayers',
      'ServiceToEndpoints',
      'ServiceToDatabase',
      'DatabaseFromService',
    ]) {
      assert.ok(r.Service.DependsOn.includes(needed), `the service does not wait for ${needed}`);
    }
    const td = r.TaskDefinition.Properties;
    assert.equal(td.RuntimePlatform.CpuArchitecture, 'ARM64');
    assert.equal(r.ServiceCpuScaling.Properties.PolicyType, 'TargetTrackingScaling');
    assert.deepEqual(r.ServiceScalableTarget.Properties.MinCapacity, { Ref: 'MinTasks' });
    assert.deepEqual(r.ServiceScalableTarget.Properties.MaxCapacity, { Ref: 'MaxTasks' });
    const service = td.ContainerDefinitions.find((/** @type {any} */ c) => c.Name === 'service');
    const env = Object.fromEntries(
      service.Environment.map((/** @type {any} */ e) => [e.Name, e.Value]),
    );
    assert.deepEqual(env.WORKERS, {
      'Fn::FindInMap': ['TaskSizes', { Ref: 'TaskVcpus' }, 'Workers'],
    });
    for (const [vcpus, size] of Object.entries(t.Mappings.TaskSizes)) {
      assert.equal(Number(size.Cpu), Number(vcpus) * 1024);
      assert.equal(
        Number(size.Workers),
        vcpus === '1' ? 0 : Number(vcpus),
        `${vcpus} vCPU: one worker per vCPU`,
      );
    }
    assert.deepEqual(t.Parameters.TaskVcpus.AllowedValues, Object.keys(t.Mappings.TaskSizes));
    // TLS to the database, verified against the RDS CAs the image carries.
    assert.equal(env.PGSSLMODE, 'verify-full');
    assert.equal(env.NODE_EXTRA_CA_CERTS, '/app/rds-global-bundle.pem');
    assert.match(
      readFileSync(path.join(ROOT, 'service', 'Dockerfile'), 'utf8'),
      /rds-global-bundle\.pem/,
    );
    // Migrations first, in their own container; the service starts only once they succeeded.
    const migrate = td.ContainerDefinitions.find((/** @type {any} */ c) => c.Name === 'migrate');
    assert.equal(migrate.Essential, false);
    assert.deepEqual(migrate.Command, ['node', 'db/src/migrate-cli.js']);
    assert.deepEqual(service.DependsOn, [{ ContainerName: 'migrate', Condition: 'SUCCESS' }]);
    for (const c of td.ContainerDefinitions)
      assert.deepEqual(c.LogConfiguration.Options['awslogs-group'], { Ref: 'ServiceLogGroup' });
    for (const g of ['ServiceLogGroup', 'FeederLogGroup'])
      assert.deepEqual(r[g].Properties.RetentionInDays, { Ref: 'LogRetentionDays' });
  });

  test('the database: encrypted, private, TLS forced, backups and deletion protection as parameters', () => {
    const r = t.Resources;
    const db = r.Database.Properties;
    assert.equal(db.StorageEncrypted, true);
    assert.equal(db.PubliclyAccessible, false);
    assert.deepEqual(db.BackupRetentionPeriod, { Ref: 'DbBackupRetentionDays' });
    assert.deepEqual(db.DeletionProtection, { Ref: 'DbDeletionProtection' });
    assert.equal(r.Database.DeletionPolicy, 'Snapshot');
    assert.equal(r.DatabaseParameters.Properties.Parameters['rds.force_ssl'], '1');
    assert.deepEqual(r.DatabaseSubnetGroup.Properties.SubnetIds, [
      { Ref: 'PrivateSubnetA' },
      { Ref: 'PrivateSubnetB' },
    ]);
    // Private subnets: no internet gateway and no NAT anywhere in the stack.
    const types = Object.values(t.Resources).map((/** @type {any} */ x) => x.Type);
    assert.ok(
      !types.includes('AWS::EC2::InternetGateway') && !types.includes('AWS::EC2::NatGateway'),
    );
  });

  test('least privilege: the roles reach this queue, these log groups and these secrets only', () => {
    const statements = (/** @type {any} */ role) =>
      role.Properties.Policies.flatMap((/** @type {any} */ p) => p.PolicyDocument.Statement).map(
        (/** @type {any} */ s) => (s['Fn::If'] ? s['Fn::If'][1] : s),
      );
    const feeder = statements(t.Resources.FeederRole);
    assert.deepEqual(t.Resources.FeederFunction.Properties.Role, {
      'Fn::GetAtt': ['FeederRole', 'Arn'],
    });
    assert.equal(
      t.Resources.FeederRole.Properties.ManagedPolicyArns,
      undefined,
      'no managed policy reaching every queue and log group',
    );
    const exec = statements(t.Resources.TaskExecutionRole);
    // A "*" resource only for calls AWS does not let one scope: ECR login, X-Ray writes, VPC network interfaces.
    for (const s of [...feeder, ...exec].filter((s) => s.Resource === '*')) {
      assert.ok(
        []
          .concat(s.Action)
          .every((/** @type {string} */ a) => /^(ecr:GetAuthorizationToken|xray:Put|ec2:)/.test(a)),
        `${s.Sid}: "*" resource`,
      );
    }
    assert.deepEqual(
      feeder.find((/** @type {any} */ s) => s.Sid === 'ReceiveAndDeleteBatches').Resource,
      { 'Fn::GetAtt': ['IngestQueue', 'Arn'] },
    );
    assert.match(
      JSON.stringify(
        feeder.find((/** @type {any} */ s) => s.Sid === 'WriteTheFeederLogs').Resource,
      ),
      /FeederLogGroup\.Arn/,
    );
    assert.match(
      JSON.stringify(exec.find((/** @type {any} */ s) => s.Sid === 'WriteTheServiceLogs').Resource),
      /ServiceLogGroup\.Arn/,
    );
    // The application's one AWS call: GetSecretValue on the token secret, and nothing else.
    assert.deepEqual(t.Resources.TaskDefinition.Properties.TaskRoleArn, {
      'Fn::GetAtt': ['ServiceTaskRole', 'Arn'],
    });
    const task = statements(t.Resources.ServiceTaskRole);
    assert.deepEqual(
      task.map((/** @type {any} */ s) => [s.Action, s.Resource]),
      [
        ['secretsmanager:GetSecretValue', { Ref: 'IngestTokenSecret' }],
        ['kms:Decrypt', { 'Fn::GetAtt': ['DataKey', 'Arn'] }],
      ],
    );
    assert.ok(
      !JSON.stringify(exec).includes('IngestTokenSecret'),
      'ECS no longer injects the token at start',
    );
    const rotation = statements(t.Resources.TokenRotationRole);
    for (const s of rotation.filter((/** @type {any} */ s) =>
      String(s.Action).includes('secretsmanager'),
    ))
      assert.deepEqual(s.Resource, { Ref: 'IngestTokenSecret' }, `${s.Sid}: this secret only`);
    for (const s of rotation.filter((/** @type {any} */ s) => s.Resource === '*'))
      assert.ok(
        [].concat(s.Action).every((/** @type {string} */ a) => a.startsWith('ec2:')),
        `${s.Sid}: "*" resource`,
      );
  });

  test('the token secret rotates on a schedule, by a function of ours that waits for the services to read the pending version', () => {
    const r = t.Resources;
    const secret = r.IngestTokenSecret.Properties.GenerateSecretString;
    assert.deepEqual(
      [secret.SecretStringTemplate, secret.GenerateStringKey],
      ['{}', 'feeder'],
      'an INGEST_TOKENS object: the feeder under "feeder"',
    );
    const schedule = r.TokenRotationSchedule.Properties;
    assert.deepEqual(schedule.SecretId, { Ref: 'IngestTokenSecret' });
    assert.deepEqual(schedule.RotationLambdaARN, {
      'Fn::GetAtt': ['TokenRotationFunction', 'Arn'],
    });
    assert.deepEqual(schedule.RotationRules.ScheduleExpression, {
      'Fn::Sub': 'rate(${RotationDays} days)',
    });
    assert.equal(r.TokenRotationPermission.Properties.Principal, 'secretsmanager.amazonaws.com');
    const fn = r.TokenRotationFunction.Properties;
    assert.equal(fn.Handler, 'rotate-token.handler');
    assert.deepEqual(r.TokenRotationFunction.Metadata.BuildProperties.EntryPoints, [
      'rotate-token.js',
    ]);
    // setSecret waits two of the service's refreshes (60 s for a secret) and must fit in the timeout.
    const waitMs = Number(fn.Environment.Variables.ROTATION_WAIT_MS);
    assert.ok(waitMs >= 2 * 60_000, `ROTATION_WAIT_MS ${waitMs}`);
    assert.ok(
      fn.Timeout * 1000 >= waitMs + 30_000,
      `a timeout of ${fn.Timeout} s leaves room after the wait`,
    );
  });

  test('feeder-only mode: with ServiceUrl set, every service-side resource is conditional', () => {
    const always = [
      'DeadLetterQueue',
      'IngestQueue',
      'DataKey',
      'FeederLogGroup',
      'FeederRole',
      'FeederFunction',
      'DeadLetterAlarm',
      'QueueAgeAlarm',
      'FeederErrorsAlarm',
      'FeederThrottlesAlarm',
      'Dashboard',
    ];
    // The proxy's resources are the full deployment's too: UseDatabaseProxy includes DeployService.
    assert.deepEqual(t.Conditions.UseDatabaseProxy['Fn::And'][0], { Condition: 'DeployService' });
    for (const [name, r] of Object.entries(t.Resources)) {
      if (!always.includes(name))
        assert.ok(
          ['DeployService', 'UseDatabaseProxy'].includes(r.Condition),
          `${name} must not be deployed in the ServiceUrl mode`,
        );
    }
  });

  test('the RDS Proxy, when enabled: TLS required, Secrets Manager auth, the service through it, migrations direct, no InitQuery', () => {
    const r = t.Resources;
    assert.equal(t.Parameters.DatabaseProxy.Default, 'Disabled');
    assert.deepEqual(t.Parameters.DatabaseProxy.AllowedValues, ['Enabled', 'Disabled']);
    assert.deepEqual(t.Conditions.UseDatabaseProxy['Fn::And'][1], {
      'Fn::Equals': [{ Ref: 'DatabaseProxy' }, 'Enabled'],
    });
    for (const name of [
      'RdsProxy',
      'RdsProxyTargetGroup',
      'RdsProxyRole',
      'RdsProxySecurityGroup',
    ]) {
      assert.equal(r[name].Condition, 'UseDatabaseProxy', `${name} exists only with the proxy`);
    }
    const proxy = r.RdsProxy.Properties;
    assert.equal(proxy.EngineFamily, 'POSTGRESQL');
    assert.equal(proxy.RequireTLS, true);
    assert.deepEqual(proxy.Auth, [
      {
        AuthScheme: 'SECRETS',
        SecretArn: { 'Fn::GetAtt': ['Database', 'MasterUserSecret.SecretArn'] },
        IAMAuth: 'DISABLED',
        ClientPasswordAuthType: 'POSTGRES_SCRAM_SHA_256',
      },
    ]);
    const pool = r.RdsProxyTargetGroup.Properties.ConnectionPoolConfigurationInfo;
    assert.deepEqual(pool.MaxConnectionsPercent, { Ref: 'DbProxyMaxConnectionsPercent' });
    // Time limits are the service's, per transaction: a session setting on every proxied connection would contradict them.
    assert.equal(pool.InitQuery, undefined);
    assert.ok(pool.ConnectionBorrowTimeout <= 10, 'a saturated proxy answers within seconds');
    // The proxy's role reads this secret only.
    const role = r.RdsProxyRole.Properties.Policies.flatMap(
      (/** @type {any} */ p) => p.PolicyDocument.Statement,
    );
    assert.deepEqual(
      role.find((/** @type {any} */ s) => s.Action === 'secretsmanager:GetSecretValue').Resource,
      { 'Fn::GetAtt': ['Database', 'MasterUserSecret.SecretArn'] },
    );
    assert.ok(role.every((/** @type {any} */ s) => s.Resource !== '*'));
    const [migrate, service] = ['migrate', 'service'].map((n) =>
      r.TaskDefinition.Properties.ContainerDefinitions.find((/** @type {any} */ c) => c.Name === n),
    );
    const env = (/** @type {any} */ c) =>
      Object.fromEntries(
        c.Environment.map((/** @type {any} */ e) =>
          e['Fn::If'] ? [e['Fn::If'][1].Name, e] : [e.Name, e.Value],
        ),
      );
    // The service: the proxy's endpoint when enabled, the instance's otherwise; TLS verified either way.
    assert.deepEqual(env(service).PGHOST, {
      'Fn::If': [
        'UseDatabaseProxy',
        { 'Fn::GetAtt': ['RdsProxy', 'Endpoint'] },
        { 'Fn::GetAtt': ['Database', 'Endpoint.Address'] },
      ],
    });
    assert.equal(env(service).PGSSLMODE, 'verify-full');
    // Through the proxy, batches go as parameters (a statement's text over 16 KB pins the session).
    assert.deepEqual(env(service).INSERT_STRATEGY['Fn::If'][0], 'UseDatabaseProxy');
    assert.equal(env(service).INSERT_STRATEGY['Fn::If'][1].Value, 'unnest');
    // ...and group commit's pg-format statement stays small: 64 users of at most 165 bytes.
    for (const name of ['GROUP_COMMIT_MAX_ROWS', 'GROUP_COMMIT_SMALL_ROWS']) {
      assert.equal(env(service)[name]['Fn::If'][0], 'UseDatabaseProxy');
      assert.ok(
        Number(env(service)[name]['Fn::If'][1].Value) * 165 < 16 * 1024,
        `${name}: a group's statement under 16 KB`,
      );
    }
    // Migrations: always the instance itself.
    assert.deepEqual(env(migrate).PGHOST, { 'Fn::GetAtt': ['Database', 'Endpoint.Address'] });
    assert.match(
      env(migrate).DIRECT_DATABASE_URL['Fn::Sub'],
      /^postgresql:\/\/\$\{Database\.Endpoint\.Address\}:\$\{Database\.Endpoint\.Port\}\/sluice\?sslmode=verify-full$/,
    );
    // No task starts before the proxy's target and its network rules exist.
    assert.ok(r.Service.DependsOn.includes('RdsProxyReady'));
    const waitsFor = r.RdsProxyReady.Metadata.WaitsFor['Fn::If'];
    assert.equal(waitsFor[0], 'UseDatabaseProxy');
    assert.deepEqual(waitsFor[1].map((/** @type {any} */ x) => x.Ref).sort(), [
      'DatabaseFromRdsProxy',
      'RdsProxyFromService',
      'RdsProxyTargetGroup',
      'RdsProxyToDatabase',
      'ServiceToRdsProxy',
    ]);
  });

  test('the dashboard follows the pipeline from the queue to rows written', () => {
    const body = JSON.stringify(t.Resources.Dashboard.Properties.DashboardBody);
    for (const metric of [
      'NumberOfMessagesSent',
      'NumberOfMessagesDeleted',
      'ApproximateAgeOfOldestMessage',
      'Invocations',
      'RequestCount',
      'inserted',
      'CPUUtilization',
    ]) {
      assert.ok(body.includes(metric), `the dashboard shows no ${metric}`);
    }
  });
});
