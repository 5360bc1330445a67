// A relay-only WebRTC call between two RTCPeerConnections in one page, driven by
// Tests/integration/test_browser.py through selenium:
//
//   runCall({transport: 'udp' | 'tcp' | 'tls', user, ...}) -> Promise<report>
//
// With `keepOpen`, the call goes on after the report (window.liveCall): `sampleLiveCall`
// reads its states and packet counts, `endLiveCall` hangs up. The survival tests use it to
// see a call through a relayd crash or live upgrade.
//
// 1. GET /ice-servers?user=... on the page's own origin: the app server (the test's)
//    calls relayd's credential service with its API token and passes the
//    `format=ice-servers` body through, as a real app backend would. The page keeps
//    only the one TURN URL for the transport under test.
// 2. Two RTCPeerConnections with iceTransportPolicy 'relay' (trickle ICE within the
//    page), each sending a canvas captureStream video track and a WebAudio oscillator
//    audio track, plus a data channel that the answerer echoes.
// 3. Waits (bounded) for both to connect, for every data channel message to come back
//    intact, for a few seconds of media, and for inbound-rtp packets on both sides.
// 4. Returns what getStats() says about the selected candidate pair, its candidates,
//    bytes each way and the RTP streams; the test asserts on that.
'use strict';

const logEl = document.getElementById('log');
const logLines = [];
// What a failed call still reports: candidates gathered and ICE errors, per side.
const diagnostics = {candidates: {a: [], b: []}, iceErrors: [], states: {}};

function log(msg) {
  const line = `${(performance.now() / 1000).toFixed(3)} ${msg}`;
  logLines.push(line);
  logEl.textContent += line + '\n';
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

function withTimeout(promise, ms, what) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

// Polls `check` (async, returns a truthy value when done) until it succeeds or `ms` pass.
async function until(check, ms, what, interval = 100) {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what}`);
    await sleep(interval);
  }
}

// The ice-servers entries reduced to the one URL scheme/transport under test.
function pickServers(iceServers, transport) {
  const wanted = url => {
    const u = url.toLowerCase();
    if (transport === 'udp') return u.startsWith('turn:') && u.includes('transport=udp');
    if (transport === 'tcp') return u.startsWith('turn:') && u.includes('transport=tcp');
    if (transport === 'tls') return u.startsWith('turns:');
    return false;
  };
  const picked = [];
  for (const server of iceServers) {
    const urls = (Array.isArray(server.urls) ? server.urls : [server.urls]).filter(wanted);
    if (urls.length) picked.push({urls, username: server.username, credential: server.credential});
  }
  return picked;
}

// A video track from a canvas repainted ~30 times a second (a changing colour and a
// frame counter, so the encoder always has something to send).
function canvasTrack(canvas, hue) {
  const ctx = canvas.getContext('2d');
  let frame = 0;
  const paint = () => {
    frame += 1;
    ctx.fillStyle = `hsl(${(hue + frame * 7) % 360}, 80%, 50%)`;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = '#fff';
    ctx.font = '32px sans-serif';
    ctx.fillText(`frame ${frame}`, 20, 60);
  };
  paint();
  const timer = setInterval(paint, 33);
  const stream = canvas.captureStream(30);
  return {track: stream.getVideoTracks()[0], stream, stop: () => clearInterval(timer)};
}

// An audio track from a WebAudio oscillator.
function oscillatorTrack(audio, frequency) {
  const osc = audio.createOscillator();
  osc.frequency.value = frequency;
  const destination = audio.createMediaStreamDestination();
  osc.connect(destination);
  osc.start();
  return {track: destination.stream.getAudioTracks()[0], stream: destination.stream, stop: () => osc.stop()};
}

function pickCandidate(c) {
  if (!c) return null;
  return {
    candidateType: c.candidateType, protocol: c.protocol, relayProtocol: c.relayProtocol ?? null,
    address: c.address ?? c.ip ?? null, port: c.port, url: c.url ?? null,
  };
}

// What getStats() says about one peer connection.
async function statsSummary(pc) {
  const report = await pc.getStats();
  const byId = new Map();
  report.forEach(s => byId.set(s.id, s));
  let pair = null;
  report.forEach(s => {
    if (s.type === 'transport' && s.selectedCandidatePairId) pair = byId.get(s.selectedCandidatePairId) || pair;
  });
  const inbound = [];
  const outbound = [];
  const dataChannels = [];
  report.forEach(s => {
    if (s.type === 'inbound-rtp') {
      inbound.push({kind: s.kind, packetsReceived: s.packetsReceived ?? 0, bytesReceived: s.bytesReceived ?? 0,
                    framesDecoded: s.framesDecoded ?? null});
    } else if (s.type === 'outbound-rtp') {
      outbound.push({kind: s.kind, packetsSent: s.packetsSent ?? 0, bytesSent: s.bytesSent ?? 0});
    } else if (s.type === 'data-channel') {
      dataChannels.push({label: s.label, state: s.state, messagesSent: s.messagesSent,
                         messagesReceived: s.messagesReceived});
    }
  });
  return {
    pair: pair && {state: pair.state, nominated: pair.nominated ?? null, bytesSent: pair.bytesSent ?? 0,
                   bytesReceived: pair.bytesReceived ?? 0},
    local: pickCandidate(pair && byId.get(pair.localCandidateId)),
    remote: pickCandidate(pair && byId.get(pair.remoteCandidateId)),
    inbound, outbound, dataChannels,
  };
}

function inboundFlowing(summary) {
  const got = kind => summary.inbound.some(s => s.kind === kind && s.packetsReceived > 0);
  return got('audio') && got('video');
}

async function runCall(opts) {
  const transport = opts.transport;
  const user = opts.user || `browser-${transport}`;
  const timeoutMs = opts.timeoutMs || 20000;
  const mediaMs = opts.mediaMs || 3000;
  const messageCount = opts.messages || 20;

  const resp = await withTimeout(fetch(`/ice-servers?user=${encodeURIComponent(user)}`), 5000, 'GET /ice-servers');
  if (!resp.ok) throw new Error(`GET /ice-servers: HTTP ${resp.status}: ${await resp.text()}`);
  const body = await resp.json();
  const iceServers = pickServers(body.iceServers, transport);
  if (!iceServers.length) {
    throw new Error(`no URL for transport ${transport} in ${JSON.stringify(body.iceServers.map(s => s.urls))}`);
  }
  log(`iceServers for ${transport}: ${JSON.stringify(iceServers.map(s => s.urls))}`);
  const config = {iceServers, iceTransportPolicy: 'relay'};

  const pcs = {a: new RTCPeerConnection(config), b: new RTCPeerConnection(config)};
  const media = [];
  const audio = new AudioContext();
  let keep = false;
  const candidates = diagnostics.candidates;
  const iceErrors = diagnostics.iceErrors;
  try {
    await withTimeout(audio.resume(), 5000, 'AudioContext.resume()');

    // Trickle ICE inside the page; candidates wait until the other side has its remote description.
    const pending = {a: [], b: []};
    const other = side => (side === 'a' ? 'b' : 'a');
    for (const side of ['a', 'b']) {
      const pc = pcs[side];
      pc.onicecandidate = e => {
        if (!e.candidate || !e.candidate.candidate) return;
        candidates[side].push(e.candidate.candidate);
        const peer = pcs[other(side)];
        if (peer.remoteDescription) {
          peer.addIceCandidate(e.candidate).catch(err => log(`addIceCandidate(${other(side)}): ${err}`));
        } else {
          pending[other(side)].push(e.candidate);
        }
      };
      pc.onicecandidateerror = e => {
        iceErrors.push({side, url: e.url, errorCode: e.errorCode, errorText: e.errorText});
        log(`icecandidateerror ${side}: ${e.url} ${e.errorCode} ${e.errorText}`);
      };
      pc.onconnectionstatechange = () => {
        diagnostics.states[side] = pc.connectionState;
        log(`${side} connectionState ${pc.connectionState}`);
      };
      pc.onicegatheringstatechange = () => log(`${side} iceGatheringState ${pc.iceGatheringState}`);
    }
    const flush = async side => {
      for (const c of pending[side].splice(0)) await pcs[side].addIceCandidate(c);
    };

    // Media both ways: a canvas video track and an oscillator audio track per side.
    const canvases = {a: document.getElementById('canvas-a'), b: document.getElementById('canvas-b')};
    for (const [side, hue, freq] of [['a', 0, 440], ['b', 180, 660]]) {
      const video = canvasTrack(canvases[side], hue);
      const tone = oscillatorTrack(audio, freq);
      media.push(video, tone);
      const stream = new MediaStream([video.track, tone.track]);
      pcs[side].addTrack(video.track, stream);
      pcs[side].addTrack(tone.track, stream);
    }

    // A data channel from a; b echoes every message back with a prefix.
    const channel = pcs.a.createDataChannel('relayd-e2e', {ordered: true});
    const echoes = [];
    channel.onmessage = e => echoes.push(e.data);
    const opened = new Promise(resolve => { channel.onopen = resolve; });
    pcs.b.ondatachannel = e => {
      const remote = e.channel;
      remote.onmessage = m => remote.send(`echo:${m.data}`);
    };

    await pcs.a.setLocalDescription(await pcs.a.createOffer());
    await pcs.b.setRemoteDescription(pcs.a.localDescription);
    await flush('b');
    await pcs.b.setLocalDescription(await pcs.b.createAnswer());
    await pcs.a.setRemoteDescription(pcs.b.localDescription);
    await flush('a');

    await until(() => {
      const states = [pcs.a.connectionState, pcs.b.connectionState];
      if (states.includes('failed')) throw new Error(`connection failed: ${states}`);
      return states.every(s => s === 'connected');
    }, timeoutMs, 'both peer connections connected');
    log('connected');
    await withTimeout(opened, timeoutMs, 'data channel open');

    // Messages of several sizes, one of them larger than a single relayed packet.
    const sent = [];
    for (let i = 0; i < messageCount; i++) {
      const filler = i % 5 === 4 ? 'x'.repeat(12000) : 'y'.repeat(i * 37);
      sent.push(`message ${i} via ${transport}: ${filler}`);
    }
    for (const m of sent) channel.send(m);
    await until(() => echoes.length >= sent.length, timeoutMs, `${sent.length} data channel echoes`);
    const echoedIntact = echoes.length === sent.length && echoes.every((m, i) => m === `echo:${sent[i]}`);
    log(`echoes ${echoes.length}/${sent.length} intact=${echoedIntact}`);

    await sleep(mediaMs);
    await until(async () => inboundFlowing(await statsSummary(pcs.a)) && inboundFlowing(await statsSummary(pcs.b)),
                timeoutMs, 'inbound-rtp audio and video packets on both sides');

    const stats = {a: await statsSummary(pcs.a), b: await statsSummary(pcs.b)};
    if (opts.keepOpen) {
      keep = true;
      window.liveCall = {pcs, media, audio, channel, echoes};
    }
    return {
      transport, iceServers: iceServers.map(s => s.urls), candidates, iceErrors,
      messagesSent: sent.length, echoesReceived: echoes.length, echoedIntact,
      states: {a: pcs.a.connectionState, b: pcs.b.connectionState},
      stats, log: logLines,
    };
  } finally {
    if (!keep) await hangUp(pcs, media, audio);
  }
}

async function hangUp(pcs, media, audio) {
  for (const m of media) {
    try { m.stop(); m.track.stop(); } catch (e) { /* already stopped */ }
  }
  pcs.a.close();
  pcs.b.close();
  try { await withTimeout(audio.close(), 2000, 'AudioContext.close()'); } catch (e) { /* bounded */ }
}

// A live call's connection states and what each side has received so far; a data channel
// message sent now must come back within `timeoutMs`.
async function sampleLiveCall(opts) {
  const call = window.liveCall;
  if (!call) throw new Error('no live call');
  const received = async pc => {
    const summary = await statsSummary(pc);
    return summary.inbound.reduce((n, s) => n + s.packetsReceived, 0);
  };
  const before = call.echoes.length;
  const probe = `probe ${performance.now()}`;
  call.channel.send(probe);
  let echoed = false;
  try {
    await until(() => call.echoes.length > before && call.echoes.includes(`echo:${probe}`), opts.timeoutMs || 5000,
                'a data channel echo');
    echoed = true;
  } catch (e) { /* reported as not echoed */ }
  return {
    states: {a: call.pcs.a.connectionState, b: call.pcs.b.connectionState},
    ice: {a: call.pcs.a.iceConnectionState, b: call.pcs.b.iceConnectionState},
    packetsReceived: {a: await received(call.pcs.a), b: await received(call.pcs.b)},
    echoed,
  };
}

window.sampleLiveCallForTest = (opts, done) => {
  sampleLiveCall(opts).then(
    sample => done({ok: true, sample}),
    err => done({ok: false, error: String((err && err.stack) || err), log: logLines}),
  );
};

window.endLiveCallForTest = done => {
  const call = window.liveCall;
  window.liveCall = null;
  if (!call) return done(true);
  hangUp(call.pcs, call.media, call.audio).then(() => done(true), () => done(false));
};

// Entry point for selenium's execute_async_script: always calls back, with either
// {ok: true, report} or {ok: false, error, log}.
window.runCallForTest = (opts, done) => {
  runCall(opts).then(
    report => done({ok: true, report}),
    err => done({ok: false, error: String((err && err.stack) || err), diagnostics, log: logLines}),
  );
};
