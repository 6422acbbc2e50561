// echomq-bench's driver of BullMQ's Node package (the pinned peer in this folder).
//
// The Node side of bench/stages/bullmq_worker/worker_process.py, with the same contract: one JSON
// line on stdout, timed from the 1,000th completion to the last. Commands:
//
//   node driver.mjs scripts
//       the package's version and the SHA1 of each of its Lua scripts, as EVALSHA sends it
//   node driver.mjs fill --queue Q --jobs N
//       N jobs into queue Q with the package's own Queue.addBulk; their ids
//   node driver.mjs run --mode M --queue Q --jobs N --concurrency C --job-ms X --count a,b
//       M is one of
//         node_worker           BullMQ's Worker, its defaults but concurrency: a no-op processor
//                               (or one that waits X ms); it finishes each job with fetch next on
//         node_manual_fused     BullMQ's manual processing: C loops, each with its own token,
//                               worker.getNextJob(token), then job.moveToCompleted(r, token, true)
//         node_manual_two_call  the same with moveToCompleted(r, token, false), then getNextJob
//       --count names the client-sent commands whose INFO commandstats deltas are reported
//
// The Redis URL comes from EMQ_DRIVER_REDIS_URL (not argv: it may hold a password).
// A failure is one line on stderr and exit code 2.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import IORedis from 'ioredis';
import { Job, Queue, Worker } from 'bullmq';

// The package's scripts as it loads them (its ESM build is not importable by path).
const packageScripts = createRequire(import.meta.url)('bullmq/dist/cjs/scripts');

const URL_ENV = 'EMQ_DRIVER_REDIS_URL';
const WINDOW_FROM = 1000; // completions before the window opens: the warm-up
const FILL_CHUNK = 1000; // jobs an addBulk call
const MODES = ['node_worker', 'node_manual_fused', 'node_manual_two_call'];

class DriverError extends Error {}

function packageVersion(name) {
  const url = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')).version;
}

/** File name (as in the package's commands folder) to SHA1 of the text ioredis sends. */
function scriptShas() {
  const shas = {};
  for (const script of Object.values(packageScripts)) {
    const sha = createHash('sha1').update(script.content, 'utf8').digest('hex');
    shas[`${script.name}-${script.keys}.lua`] = sha;
  }
  return shas;
}

function redisUrl() {
  const url = process.env[URL_ENV];
  if (!url) throw new DriverError(`${URL_ENV} is not set; the bullmq_worker stage runs this driver`);
  // ioredis takes a socket as its path (/tmp/redis.sock?db=1), not as a unix:// URL
  return url.startsWith('unix://') ? url.slice('unix://'.length) : url;
}

/** A connection of the driver's own (not BullMQ's): it fails at once instead of retrying. */
async function ownConnection(url) {
  const client = new IORedis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => {}); // the failed connect() says it
  try {
    await client.connect();
  } catch (error) {
    throw new DriverError(`cannot reach Redis: ${error.message}`);
  }
  return client;
}

/** INFO commandstats as {command: {calls, usec}}, the queue's completed jobs and the server's CPU
 * seconds (INFO cpu: used_cpu_sys + used_cpu_user), read in one MULTI: one moment of the server, so
 * a job counted completed has its finishing call counted too, however late the reply reaches this
 * process. */
async function serverCounts(client, completedKey) {
  const [[infoError, info], [countError, completed], [cpuError, cpu]] = await client
    .multi()
    .info('commandstats')
    .zcard(completedKey)
    .info('cpu')
    .exec();
  if (infoError || countError || cpuError) throw infoError ?? countError ?? cpuError;
  const stats = {};
  for (const line of String(info).split('\n')) {
    const found = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (found) stats[found[1]] = { calls: Number(found[2]), usec: Number(found[3]) };
  }
  let redisCpu = 0;
  for (const line of String(cpu).split('\n')) {
    const found = /^used_cpu_(sys|user):([\d.]+)/.exec(line.trim());
    if (found) redisCpu += Number(found[2]);
  }
  return { stats, completed: Number(completed), redisCpu };
}

/** Every EVALSHA this process sends, by SHA: which of the package's scripts its Worker calls. */
function countScriptCalls() {
  const calls = new Map();
  const send = IORedis.prototype.sendCommand;
  IORedis.prototype.sendCommand = function counted(command, ...rest) {
    if (command.name === 'evalsha') {
      const sha = String(command.args[0]);
      calls.set(sha, (calls.get(sha) ?? 0) + 1);
    }
    return send.call(this, command, ...rest);
  };
  return calls;
}

function cpuSeconds() {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** Counts completions; marks the 1,000th and the last with the time, CPU and commandstats. */
class Window {
  constructor(total, statsClient, completedKey) {
    this.total = total;
    this.statsClient = statsClient;
    this.completedKey = completedKey;
    this.done = 0;
    this.start = null;
    this.end = null;
    this.failure = null;
    this.finished = new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  /** The server's counts (calls and completed jobs at one moment of it), then the time and CPU. The
   * window's jobs are the server's completions, not this process's: the loops go on completing
   * jobs while the reply travels (longer on a loaded machine), and a count read here would miss
   * jobs whose calls the server counted. */
  async mark() {
    const { stats, completed, redisCpu } = await serverCounts(this.statsClient, this.completedKey);
    return { at: performance.now(), cpu: cpuSeconds(), completed, stats, redisCpu };
  }

  completed() {
    this.done += 1;
    if (this.done === WINDOW_FROM) this.start = this.mark();
    if (this.done === this.total) {
      this.end = Promise.resolve(this.start).then(() => this.mark());
      this.resolve();
    }
  }

  fail(message) {
    this.failure ??= message;
    this.resolve();
  }

  async result(mode, concurrency, counted) {
    if (this.failure) throw new DriverError(`${mode}: ${this.failure}`);
    if (this.done < this.total || this.start === null) {
      throw new DriverError(`${mode} finished ${this.done} of ${this.total} jobs: no window to report`);
    }
    const [start, end] = [await this.start, await this.end];
    const calls = {};
    const usec = {};
    for (const name of counted) {
      const after = end.stats[name] ?? { calls: 0, usec: 0 };
      const before = start.stats[name] ?? { calls: 0, usec: 0 };
      if (after.calls > before.calls) {
        calls[name] = after.calls - before.calls;
        usec[name] = after.usec - before.usec;
      }
    }
    return {
      driver: mode,
      concurrency,
      jobs: end.completed - start.completed,
      duration_s: (end.at - start.at) / 1000,
      cpu_s: end.cpu - start.cpu,
      calls,
      usec,
      redis_cpu_s: end.redisCpu - start.redisCpu,
      errors: [],
    };
  }
}

/** BullMQ's Worker with its defaults but concurrency, until the window's last completion. */
async function runWorker(url, queue, concurrency, jobMs, window) {
  const processor = jobMs > 0 ? () => sleep(jobMs) : async () => {};
  const worker = new Worker(queue, processor, { connection: { url }, concurrency });
  worker.on('completed', () => window.completed());
  worker.on('failed', (job, error) => window.fail(`job ${job?.id} failed: ${error.message}`));
  worker.on('error', (error) => window.fail(error.message));
  await window.finished;
  await worker.close();
}

/** BullMQ's manual processing: `concurrency` loops on one Worker, each with its own token. */
async function runManual(url, queue, concurrency, jobMs, fused, window) {
  const worker = new Worker(queue, null, { connection: { url } });
  worker.on('error', (error) => window.fail(error.message));
  // The queue holds exactly window.total jobs: a loop asks for the next only while some are
  // unclaimed, so no fetch meets an empty queue (where getNextJob would block for drainDelay).
  let claimed = 0;
  const claim = () => {
    if (claimed >= window.total) return false;
    claimed += 1;
    return true;
  };
  const loop = async (token) => {
    let job = claim() ? await worker.getNextJob(token) : undefined;
    while (job && !window.failure) {
      if (jobMs > 0) await sleep(jobMs);
      const more = claim();
      if (fused) {
        const [data, id] = await job.moveToCompleted(undefined, token, more);
        window.completed();
        job = data ? Job.fromJSON(worker, data, id) : undefined;
      } else {
        await job.moveToCompleted(undefined, token, false);
        window.completed();
        job = more ? await worker.getNextJob(token) : undefined;
      }
      if (more && !job) window.fail(`the queue ran dry after ${window.done} of ${window.total} jobs`);
    }
  };
  const loops = Array.from({ length: concurrency }, (_, slot) => loop(`emq-${process.pid}-${slot}`));
  await Promise.all(loops).catch((error) => window.fail(error.message));
  await worker.close();
}

async function fill(url, name, jobs) {
  (await ownConnection(url)).disconnect(); // unreachable: one line now, not BullMQ's retries
  const queue = new Queue(name, { connection: { url } });
  queue.on('error', () => {}); // a failing addBulk rejects and says it
  const ids = [];
  try {
    for (let start = 0; start < jobs; start += FILL_CHUNK) {
      const batch = Array.from({ length: Math.min(FILL_CHUNK, jobs - start) }, () => ({
        name: 'noop',
        data: {},
      }));
      for (const job of await queue.addBulk(batch)) ids.push(job.id);
    }
  } finally {
    await queue.close();
  }
  return { ids };
}

async function run(url, options) {
  const mode = options.mode;
  if (!MODES.includes(mode)) throw new DriverError(`--mode ${mode}: use one of ${MODES.join(', ')}`);
  const jobs = Number(options.jobs);
  const concurrency = Number(options.concurrency);
  const jobMs = Number(options['job-ms']);
  if (!(jobs > WINDOW_FROM)) throw new DriverError(`--jobs ${options.jobs}: more than ${WINDOW_FROM}`);
  if (!(concurrency >= 1)) throw new DriverError(`--concurrency ${options.concurrency}: 1 or more`);
  const counted = options.count.split(',').filter(Boolean);
  const scriptCalls = countScriptCalls();
  const statsClient = await ownConnection(url);
  try {
    const window = new Window(jobs, statsClient, `bull:${options.queue}:completed`);
    if (mode === 'node_worker') await runWorker(url, options.queue, concurrency, jobMs, window);
    else {
      const fused = mode === 'node_manual_fused';
      await runManual(url, options.queue, concurrency, jobMs, fused, window);
    }
    const result = await window.result(mode, concurrency, counted);
    const names = Object.fromEntries(Object.entries(scriptShas()).map(([file, sha]) => [sha, file]));
    result.scripts = {}; // the whole run's EVALSHAs by script file: every script the driver called
    for (const [sha, calls] of scriptCalls) result.scripts[names[sha] ?? `unknown sha ${sha}`] = calls;
    return result;
  } finally {
    statsClient.disconnect();
  }
}

async function main(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      mode: { type: 'string' },
      queue: { type: 'string' },
      jobs: { type: 'string' },
      concurrency: { type: 'string', default: '1' },
      'job-ms': { type: 'string', default: '0' },
      count: { type: 'string', default: 'evalsha' },
    },
  });
  const [command] = positionals;
  if (command === 'scripts') {
    return {
      bullmq: packageVersion('bullmq'),
      ioredis: packageVersion('ioredis'),
      node: process.versions.node,
      scripts: scriptShas(),
    };
  }
  if (command !== 'fill' && command !== 'run') {
    throw new DriverError(`unknown command ${command ?? '(none)'}: use scripts, fill or run`);
  }
  if (!values.queue || !values.jobs) throw new DriverError(`${command} needs --queue and --jobs`);
  const url = redisUrl();
  return command === 'fill' ? fill(url, values.queue, Number(values.jobs)) : run(url, values);
}

try {
  const line = `${JSON.stringify(await main(process.argv.slice(2)))}\n`;
  process.stdout.write(line, () => process.exit(0)); // exit: BullMQ's timers would hold it open
} catch (error) {
  const message = error instanceof DriverError ? error.message : String(error?.message ?? error);
  process.stderr.write(`echomq-bench node driver: error: ${message.split('\n')[0]}\n`);
  process.exit(2);
}
