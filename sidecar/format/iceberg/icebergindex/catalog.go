package icebergindex

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of postgresql:// catalogs
	"github.com/uptrace/bun/driver/sqliteshim"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// Catalog is where a table's catalog is (spec.streams[].iceberg.catalog)
// and the credentials shardfeed index reads it with, which come from its
// own environment, never a manifest.
type Catalog struct {
	datav1alpha1.IcebergCatalog
	// Token is a REST catalog's bearer token; Credential its OAuth2
	// client credential, "client-id:client-secret".
	Token, Credential string
	// User and Password of a sql catalog's database.
	User, Password string
	// Timeout bounds each request to the catalog (0: DefaultTimeout).
	Timeout time.Duration
}

// DefaultTimeout bounds one request to a catalog.
const DefaultTimeout = 30 * time.Second

// Describe is the catalog as an index records it: its kind and where it
// is, with no credentials.
func (c Catalog) Describe() string {
	if c.Type == datav1alpha1.IcebergCatalogGlue {
		return strings.TrimSpace("glue " + c.Region + " " + c.CatalogID)
	}
	return string(c.Type) + " " + c.URI
}

func (c Catalog) name() string {
	if c.Name != "" {
		return c.Name
	}
	return "default"
}

func (c Catalog) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// open connects to the catalog, read-only where the catalog lets us say so.
func (c Catalog) open(ctx context.Context) (catalog.Catalog, error) {
	switch c.Type {
	case datav1alpha1.IcebergCatalogREST:
		return c.openREST(ctx)
	case datav1alpha1.IcebergCatalogSQL:
		return c.openSQL()
	case datav1alpha1.IcebergCatalogGlue:
		return c.openGlue(ctx)
	}
	return nil, fmt.Errorf("catalog type %q is not one of rest, sql or glue", c.Type)
}

func (c Catalog) openREST(ctx context.Context) (catalog.Catalog, error) {
	u, err := url.Parse(c.URI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("a rest catalog's uri is http(s)://host[:port][/path] with no user or password, not %q", c.URI)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // an author's endpoint, reached as written
	transport.DialContext = (&net.Dialer{Timeout: c.timeout()}).DialContext
	transport.ResponseHeaderTimeout = c.timeout()
	opts := []rest.Option{rest.WithCustomTransport(transport)}
	if c.Warehouse != "" {
		opts = append(opts, rest.WithWarehouseLocation(c.Warehouse))
	}
	switch {
	case c.Token != "":
		opts = append(opts, rest.WithOAuthToken(c.Token))
	case c.Credential != "":
		opts = append(opts, rest.WithCredential(c.Credential))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	cat, err := rest.NewCatalog(ctx, c.name(), c.URI, opts...)
	if err != nil {
		return nil, fmt.Errorf("rest catalog %s: %w", c.URI, err)
	}
	return cat, nil
}

// openSQL opens a sql catalog's database: sqlite:///path (read-only),
// postgresql://host[:port]/db or mysql://host[:port]/db.
func (c Catalog) openSQL() (catalog.Catalog, error) {
	u, err := url.Parse(c.URI)
	if err != nil || u.User != nil {
		return nil, fmt.Errorf("a sql catalog's uri is sqlite:///path, postgresql://host[:port]/database or mysql://host[:port]/database with no user or password, not %q", c.URI)
	}
	var (
		driver, dsn string
		dialect     sqlcat.SupportedDialect
	)
	switch u.Scheme {
	case "sqlite":
		// As SQLAlchemy (pyiceberg's SqlCatalog) reads it: sqlite:///rel.db
		// is relative, sqlite:////abs/path.db absolute.
		path := strings.TrimPrefix(u.Path, "/")
		if path == "" {
			return nil, fmt.Errorf("sqlite catalog %q names no file: write sqlite:////absolute/path/catalog.db", c.URI)
		}
		driver, dialect = sqliteshim.ShimName, sqlcat.SQLite
		dsn = "file:" + path + "?mode=ro"
	case "postgresql", "postgres":
		driver, dialect = "pgx", sqlcat.Postgres
		pg := *u
		pg.Scheme = "postgres"
		if c.User != "" {
			pg.User = url.UserPassword(c.User, c.Password)
		}
		q := pg.Query()
		q.Set("connect_timeout", fmt.Sprint(int(c.timeout().Seconds())))
		pg.RawQuery = q.Encode()
		dsn = pg.String()
	case "mysql":
		driver, dialect = "mysql", sqlcat.MySQL
		cfg := mysql.NewConfig()
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
		cfg.User, cfg.Passwd = c.User, c.Password
		cfg.Timeout, cfg.ReadTimeout = c.timeout(), c.timeout()
		dsn = cfg.FormatDSN()
	default:
		return nil, fmt.Errorf("sql catalog %q: the scheme is not sqlite, postgresql or mysql", c.URI)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("sql catalog %s: %w", c.URI, err)
	}
	// Read-only: never create or migrate the catalog's tables.
	cat, err := sqlcat.NewCatalog(c.name(), db, dialect, iceberg.Properties{"init_catalog_tables": "false"})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sql catalog %s: %w", c.URI, err)
	}
	return cat, nil
}

func (c Catalog) openGlue(ctx context.Context) (catalog.Catalog, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("glue catalog: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("glue catalog: no region: set iceberg.catalog.region or AWS_REGION")
	}
	gopts := []glue.Option{glue.WithAwsConfig(cfg)}
	if c.CatalogID != "" {
		gopts = append(gopts, glue.WithAwsProperties(glue.AwsProperties{glue.CatalogIdKey: c.CatalogID}))
	}
	cat, err := glue.NewCatalog(gopts...)
	if err != nil {
		return nil, fmt.Errorf("glue catalog: %w", err)
	}
	return cat, nil
}
