# Plinth: one image for the API process and the migrator.
#   docker build -t plinth .
#   docker run --rm -e PLINTH_ENVIRONMENT=Production -e DATABASE_URL=... plinth bun src/migrate.ts --bootstrap-platform-admin
#   docker run -p 8080:8080 -e PLINTH_ENVIRONMENT=Production ... plinth
FROM oven/bun:1.4.4-slim AS deps
WORKDIR /app
COPY package.json bun.lock ./
RUN bun install --frozen-lockfile --production --ignore-scripts

FROM oven/bun:1.4.4-slim
WORKDIR /app
ENV NODE_ENV=production PLINTH_ENVIRONMENT=Production PORT=8080
COPY --from=deps /app/node_modules ./node_modules
COPY package.json bun.lock ./
COPY src ./src
COPY drizzle ./drizzle
COPY config ./config
# the official image ships an unprivileged `bun` user (uid 1000)
USER bun
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD bun -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/api/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
STOPSIGNAL SIGTERM
CMD ["bun", "src/server.ts"]
